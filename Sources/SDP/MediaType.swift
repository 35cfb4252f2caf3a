/// The `<media>` field of an `m=` line. Unknown types are kept as written.
public struct MediaType: SDPToken {
    /// The token as it appears on the wire, for example `audio`.
    public var rawValue: String

    /// Wraps a media type token.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `audio`
    public static let audio = MediaType(rawValue: "audio")
    /// `video`
    public static let video = MediaType(rawValue: "video")
    /// `text` (for example RFC 4103 real-time text)
    public static let text = MediaType(rawValue: "text")
    /// `application` (for example BFCP or WebRTC data channels)
    public static let application = MediaType(rawValue: "application")
    /// `message` (MSRP)
    public static let message = MediaType(rawValue: "message")
    /// `image` (T.38 fax)
    public static let image = MediaType(rawValue: "image")
}
