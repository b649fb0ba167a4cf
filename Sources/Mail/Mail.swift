import CCurlShim
import Foundation
import NIOPosix

/// One e-mail, as the outbox holds it.
public struct MailMessage: Sendable, Hashable {
    public var from: String
    public var to: String
    public var subject: String
    public var text: String
    public var html: String?
    /// `<…@…>`: derived from the outbox row, so that a repeat is recognisable.
    public var messageID: String
    /// RFC 8058 one-click unsubscribe, when the mail is a notice.
    public var unsubscribe: URL?
    public var date: Date

    public init(
        from: String, to: String, subject: String, text: String, html: String? = nil, messageID: String,
        unsubscribe: URL? = nil, date: Date = Date()
    ) {
        self.from = from
        self.to = to
        self.subject = subject
        self.text = text
        self.html = html
        self.messageID = messageID
        self.unsubscribe = unsubscribe
        self.date = date
    }

    /// The message as SMTP sends it: headers, then a text part (and an HTML one), each in
    /// base64 so that no line of the body can end the message or pass 998 octets. No header
    /// value can carry a line break: one in a name or subject would start a header of its own.
    public var rfc5322: String {
        let boundary = "lender-" + String(messageID.hashValue.magnitude, radix: 36)
        var headers = [
            "From: \(Self.header(from))",
            "To: \(Self.header(to))",
            "Subject: \(Self.encodedWord(subject))",
            "Date: \(Self.rfc5322Date(date))",
            "Message-ID: \(Self.header(messageID))",
            "MIME-Version: 1.0",
        ]
        if let unsubscribe {
            headers.append("List-Unsubscribe: <\(Self.header(unsubscribe.absoluteString))>")
            headers.append("List-Unsubscribe-Post: List-Unsubscribe=One-Click")
        }
        func part(_ type: String, _ body: String) -> String {
            "Content-Type: \(type); charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n" + Self.base64Lines(body)
        }
        guard let html else {
            return (headers + [part("text/plain", text)]).joined(separator: "\r\n") + "\r\n"
        }
        headers.append("Content-Type: multipart/alternative; boundary=\"\(boundary)\"")
        return headers.joined(separator: "\r\n") + "\r\n\r\n"
            + "--\(boundary)\r\n\(part("text/plain", text))\r\n"
            + "--\(boundary)\r\n\(part("text/html", html))\r\n"
            + "--\(boundary)--\r\n"
    }

    /// A header value with every control character (CR and LF above all) taken out.
    static func header(_ value: String) -> String {
        String(value.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.map(Character.init))
    }

    /// RFC 2047 for a subject that is not plain ASCII; plain ASCII as it is.
    static func encodedWord(_ value: String) -> String {
        let clean = header(value)
        guard clean.unicodeScalars.contains(where: { !$0.isASCII }) else { return clean }
        return "=?UTF-8?B?\(Data(clean.utf8).base64EncodedString())?="
    }

    static func base64Lines(_ text: String) -> String {
        let encoded = Data(text.utf8).base64EncodedString()
        var lines = [Substring]()
        var rest = Substring(encoded)
        while !rest.isEmpty {
            lines.append(rest.prefix(76))
            rest = rest.dropFirst(76)
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    static func rfc5322Date(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss '+0000'"
        return formatter.string(from: date)
    }

    /// The bare address of `Name <address>` or of an address alone: what SMTP's envelope names.
    public static func address(_ value: String) -> String {
        if let open = value.lastIndex(of: "<"), let close = value.lastIndex(of: ">"), open < close {
            return String(value[value.index(after: open)..<close])
        }
        return header(value)
    }
}

/// Where mail goes: SMTP, or nowhere (no `SMTP_URL`: the outbox keeps it).
public protocol Mailer: Sendable {
    func send(_ message: MailMessage) async throws
}

public struct MailError: Error, CustomStringConvertible {
    public var code: Int32
    public var message: String
    public var description: String { "SMTP (libcurl \(code)): \(message)" }
}

/// SMTP through libcurl: `smtp://host:port` (STARTTLS when offered), `smtps://host:port`,
/// credentials as `smtp://user:password@host`. Each message is one connection, on NIO's
/// thread pool: libcurl's easy interface blocks.
public struct SMTPMailer: Mailer {
    public let url: String
    public var timeoutSeconds = 30

    public init(url: String) {
        self.url = url
    }

    public func send(_ message: MailMessage) async throws {
        let data = message.rfc5322
        let from = "<\(MailMessage.address(message.from))>"
        let to = "<\(MailMessage.address(message.to))>"
        let url = url
        let timeout = timeoutSeconds
        let failure: MailError? = try await NIOThreadPool.singleton.runIfActive {
            var error = [CChar](repeating: 0, count: 512)
            let bytes = Array(data.utf8)
            let code = bytes.withUnsafeBufferPointer { body in
                body.withMemoryRebound(to: CChar.self) { text in
                    lender_smtp_send(url, from, to, text.baseAddress, text.count, timeout, &error, error.count)
                }
            }
            guard code != 0 else { return nil }
            return MailError(code: code, message: String(cString: error))
        }
        if let failure { throw failure }
    }
}
