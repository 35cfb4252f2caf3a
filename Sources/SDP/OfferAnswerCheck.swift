// A third party's judgement of an answer against its offer (RFC 3264 §6), for tools that watch
// an exchange they take no part in (the capture check), without local capabilities.

extension OfferAnswer {
    /// What is wrong with `answer` as the answer to `offer`, judged as a third party that has
    /// no codecs of its own (RFC 3264 §6, §6.1): an empty list when nothing is.
    ///
    /// Checked: the answer has as many `m=` lines as the offer (``OfferAnswerError/Reason/mediaLineCount(expected:found:)``),
    /// each of the same media type (``OfferAnswerError/Reason/mediaTypeMismatch(media:)``); a
    /// stream accepted in the answer (port not 0) that the offer did not reject keeps the
    /// offer's transport (plain RTP may be answered `RTP/SAVP` when the offer carried
    /// `a=crypto`, ``OfferAnswerError/Reason/transportMismatch(media:)``), has a connection address
    /// (``OfferAnswerError/Reason/missingConnection(media:)``), does not map an offered payload
    /// type number to another codec (``OfferAnswerError/Reason/payloadTypeMismatch(media:payloadType:)``),
    /// and lists at least one codec of the offer (``OfferAnswerError/Reason/noCommonCodec(media:)``,
    /// or ``OfferAnswerError/Reason/onlyAuxiliaryCodecsInCommon(media:)`` when only
    /// telephone-event or CN are common while the offer had a real codec).
    public static func problems(answer: SessionDescription, offer: SessionDescription) -> [OfferAnswerError.Reason] {
        guard answer.media.count == offer.media.count else {
            return [.mediaLineCount(expected: offer.media.count, found: answer.media.count)]
        }
        var out: [OfferAnswerError.Reason] = []
        for (index, (offered, answered)) in zip(offer.media, answer.media).enumerated() {
            guard offered.media == answered.media else {
                out.append(.mediaTypeMismatch(media: index))
                continue
            }
            guard !offered.isRejected, !answered.isRejected else { continue }
            let upgradedToSAVP = offered.proto == .rtpAVP && answered.proto == .rtpSAVP && !offered.cryptos.isEmpty
            guard answered.proto == offered.proto || upgradedToSAVP else {
                out.append(.transportMismatch(media: index))
                continue
            }
            if answer.connection(for: answered) == nil { out.append(.missingConnection(media: index)) }
            // Only RTP profiles name codecs by payload type numbers.
            guard offered.proto.isRTP else { continue }
            var common = false, commonReal = false, offeredReal = false, mismatch = false
            for pt in offered.payloadTypes {
                if let c = codec(in: offered, payloadType: pt)?.effective, !isAuxiliaryName(c.encodingName) { offeredReal = true }
            }
            for pt in answered.payloadTypes {
                let offeredHere = offered.payloadTypes.contains(pt)
                guard let remote = codec(in: answered, payloadType: pt)?.effective
                    ?? (offeredHere ? codec(in: offered, payloadType: pt)?.effective : nil) else { continue }
                if offeredHere, let same = codec(in: offered, payloadType: pt)?.effective {
                    if !sameCodec(same, remote) {
                        if !mismatch { out.append(.payloadTypeMismatch(media: index, payloadType: pt)) }
                        mismatch = true
                        continue
                    }
                    common = true
                    if !isAuxiliaryName(remote.encodingName) { commonReal = true }
                } else if offered.payloadTypes.contains(where: { o in codec(in: offered, payloadType: o).map { sameCodec($0.effective, remote) } ?? false }) {
                    // The offer's codec under another number (allowed, RFC 3264 §6.1).
                    common = true
                    if !isAuxiliaryName(remote.encodingName) { commonReal = true }
                }
            }
            if mismatch { continue }
            if !common {
                // Formats the offer named without a codec we know (dynamic numbers without
                // a=rtpmap) cannot be judged: only a list of known codecs is.
                let judged = answered.payloadTypes.allSatisfy { codec(in: answered, payloadType: $0) != nil }
                if judged && !answered.payloadTypes.isEmpty { out.append(.noCommonCodec(media: index)) }
            } else if !commonReal && offeredReal {
                out.append(.onlyAuxiliaryCodecsInCommon(media: index))
            }
        }
        return out
    }

    static func isAuxiliaryName(_ name: String) -> Bool {
        let n = name.lowercased()
        return n == "telephone-event" || n == "cn"
    }
}
