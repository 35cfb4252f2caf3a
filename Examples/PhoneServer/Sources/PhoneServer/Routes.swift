import Hummingbird
import SIPMessage
import Switchboard

/// The HTTP API and the page:
///
/// - `GET /` the page; `GET /events` server-sent events, one JSON object per call event;
/// - `GET /calls` every call with its state; `POST /calls` `{"to": "sip:…"}` dials;
/// - `POST /calls/{id}/answer`, `/reject`, `/hangup`, `/hold`, `/resume`, `/digits` (`{"digits": "12#"}`).
///
/// Each action answers once the network did (the ACK of an answer, the peer's answer to a
/// hold) with the call, 404 for an unknown call, 409 with the reason when the call cannot
/// (answering an outgoing call, holding one that rings, a refused re-INVITE…).
func makeRouter(center: CallCenter, identity: String) -> Router<BasicRequestContext> {
    let router = Router()
    let page = Page(identity: identity)
    router.get("/") { _, _ in page }

    router.get("/events") { _, _ in
        let frames = center.subscribe()
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            // A comment first, so the browser sees the stream open before the first event.
            try await writer.write(ByteBuffer(string: ": \(identity)\n\n"))
            for await frame in frames {
                try await writer.write(ByteBuffer(string: frame))
            }
            try await writer.finish(nil)
        })
    }

    router.get("/calls") { _, _ in CallList(calls: center.summaries()) }

    router.post("/calls") { request, context in
        let dial = try await request.decode(as: DialRequest.self, context: context)
        let target: SIPURI
        do {
            target = try SIPURI(dial.to)
        } catch {
            throw HTTPError(.badRequest, message: "\"to\" is not a SIP URI: \(error)")
        }
        let call = await center.dial(target)
        return EditedResponse(status: .created, response: center.summary(call))
    }

    action("answer", on: router, center) { call, _, _ in try await call.answer() }
    action("reject", on: router, center) { call, _, _ in try await call.reject() }
    action("hangup", on: router, center) { call, _, _ in await call.hangUp() }
    action("hold", on: router, center) { call, _, _ in try await call.setHeld(true) }
    action("resume", on: router, center) { call, _, _ in try await call.setHeld(false) }
    action("digits", on: router, center) { call, request, context in
        let digits = try await request.decode(as: DigitsRequest.self, context: context)
        _ = try await call.sendDigits(digits.digits)
    }
    return router
}

/// `POST /calls/{id}/NAME`: runs `perform` on the call, then returns it.
private func action(_ name: String, on router: Router<BasicRequestContext>, _ center: CallCenter,
                    _ perform: @escaping @Sendable (Call, Request, BasicRequestContext) async throws -> Void) {
    router.post("/calls/{id}/\(name)") { request, context in
        let id = try context.parameters.require("id", as: UInt64.self)
        guard let call = center.call(id) else { throw HTTPError(.notFound, message: "no call \(id)") }
        do {
            try await perform(call, request, context)
        } catch let error as CallError {
            throw HTTPError(.conflict, message: "\(name): \(error)")
        }
        return center.summary(call)
    }
}
