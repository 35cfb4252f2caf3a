/// Standard base64 (RFC 4648 section 4) for SDES key material.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    private static func sextet(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x41...0x5A: return b - 0x41
        case 0x61...0x7A: return b - 0x61 + 26
        case 0x30...0x39: return b - 0x30 + 52
        case 0x2B: return 62
        case 0x2F: return 63
        default: return nil
        }
    }

    /// Decodes base64 with or without `=` padding; nil for characters outside
    /// the alphabet, misplaced padding, or an impossible length.
    static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        var input = Array(text)
        var padding = 0
        while input.last == ASCII.equals {
            input.removeLast()
            padding += 1
        }
        guard padding <= 2 else { return nil }
        if padding > 0, (input.count + padding) % 4 != 0 { return nil }
        guard input.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(input.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for b in input {
            guard let v = sextet(b) else { return nil }
            accumulator = (accumulator << 6) | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        return output
    }

    /// Encodes bytes as base64 with `=` padding.
    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = UInt32(bytes[i])
            let b1 = i + 1 < bytes.count ? UInt32(bytes[i + 1]) : 0
            let b2 = i + 2 < bytes.count ? UInt32(bytes[i + 2]) : 0
            let triple = (b0 << 16) | (b1 << 8) | b2
            out.append(alphabet[Int((triple >> 18) & 0x3F)])
            out.append(alphabet[Int((triple >> 12) & 0x3F)])
            out.append(i + 1 < bytes.count ? alphabet[Int((triple >> 6) & 0x3F)] : ASCII.equals)
            out.append(i + 2 < bytes.count ? alphabet[Int(triple & 0x3F)] : ASCII.equals)
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
