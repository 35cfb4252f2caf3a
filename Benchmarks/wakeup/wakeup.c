/*
 * Benchmarks/wakeup - how late this machine wakes a thread that sleeps to an absolute deadline,
 * with nothing else of ours running: the platform's floor under the media engine's tick
 * lateness (scripts/bench-media-session runs it before each count).
 *
 * usage: wakeup [--seconds S] [--period-us P] [--realtime PRIORITY]
 * Sleeps to deadlines P µs apart (default 500, the engine's phase slot at 20 ms / 40) for S
 * seconds (default 3), as SCHED_FIFO at PRIORITY if given (as the engine's workers with
 * --realtime), and prints one line:
 *   wakeups=N p99_ms=... p999_ms=... max_ms=... over_2ms_percent=...
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUCKETS 1000 /* 0.1 ms each: 0 to 100 ms */

int main(int argc, char **argv) {
    double seconds = 3;
    long period_us = 500;
    int priority = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seconds") == 0) seconds = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--period-us") == 0) period_us = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--realtime") == 0) priority = atoi(argv[i + 1]);
        else { fprintf(stderr, "wakeup: unknown option %s\n", argv[i]); return 2; }
    }
    if (seconds <= 0 || seconds > 600 || period_us < 50 || period_us > 1000000) {
        fprintf(stderr, "wakeup: --seconds takes (0, 600], --period-us 50 to 1000000\n");
        return 2;
    }
    if (priority > 0) {
        struct sched_param sp = {.sched_priority = priority};
        if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) { perror("wakeup: sched_setscheduler"); return 1; }
    }
    static long histogram[BUCKETS];
    long count = (long)(seconds * 1e6 / (double)period_us), over = 0;
    long long worst = 0;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    for (long i = 0; i < count; i++) {
        deadline.tv_nsec += period_us * 1000;
        while (deadline.tv_nsec >= 1000000000) { deadline.tv_nsec -= 1000000000; deadline.tv_sec++; }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) != 0) {}
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long late = (long long)(now.tv_sec - deadline.tv_sec) * 1000000000LL + (now.tv_nsec - deadline.tv_nsec);
        if (late < 0) late = 0;
        if (late > worst) worst = late;
        if (late > 2000000) over++;
        long bucket = (long)(late / 100000);
        histogram[bucket < BUCKETS ? bucket : BUCKETS - 1]++;
        /* After a stall longer than a period, the next deadlines are already past: count them
         * late as the engine's ticks would be (it runs missed ticks, it does not skip them). */
    }
    double quantile[2] = {0.99, 0.999}, value[2] = {0, 0};
    for (int q = 0; q < 2; q++) {
        long seen = 0;
        for (int b = 0; b < BUCKETS; b++) {
            seen += histogram[b];
            if ((double)seen >= quantile[q] * (double)count) { value[q] = (b + 1) * 0.1; break; }
        }
    }
    printf("wakeups=%ld p99_ms=%.1f p999_ms=%.1f max_ms=%.2f over_2ms_percent=%.2f\n", count, value[0], value[1],
           (double)worst / 1e6, 100.0 * (double)over / (double)count);
    return 0;
}
