import Foundation
import HTTPTypes
import Hummingbird
import Marketplace
import Mustache
import NIOCore

/// The desk's pages (SPEC §12.6): mustache templates in `Resources/Desk`, every value escaped
/// for HTML by `{{…}}` (the templates use no `{{{…}}}`), one stylesheet, no script.
struct DeskPages: Sendable {
    let library: MustacheLibrary
    let stylesheet: ByteBuffer

    /// The templates built with the binary, from the Server module's resources; a build
    /// without them serves an error page, not a crash.
    static let bundled: DeskPages = {
        var library = MustacheLibrary()
        var stylesheet = ByteBuffer()
        let folder = bundledFolder
        let files = folder.flatMap { try? FileManager.default.contentsOfDirectory(at: $0, includingPropertiesForKeys: nil) } ?? []
        for file in files {
            guard let text = try? String(contentsOf: file, encoding: .utf8) else { continue }
            if file.pathExtension == "mustache" {
                try? library.register(text, named: file.deletingPathExtension().lastPathComponent)
            } else if file.lastPathComponent == "desk.css" {
                stylesheet = ByteBuffer(string: text)
            }
        }
        return DeskPages(library: library, stylesheet: stylesheet)
    }()

    /// The Server module's `Desk` resources, found by hand as the mail templates are:
    /// `Bundle.module` stops the process when its folder is missing.
    static let bundledFolder: URL? = {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        return [executable, Bundle.main.bundleURL]
            .map { $0.appendingPathComponent("lender_Server.resources/Desk") }
            .first { FileManager.default.fileExists(atPath: $0.path) }
    }()

    /// What every desk answer carries: no framing by anyone (clickjacking), no script at all,
    /// forms posted to the desk only, nothing cached.
    static let headers: HTTPFields = [
        .contentSecurityPolicy:
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        .xFrameOptions: "DENY",
        .xContentTypeOptions: "nosniff",
        .referrerPolicy: "same-origin",
        .cacheControl: "no-store",
    ]

    /// `template` rendered with `values` (and the page's `title`, `csrf`, `flash`), as HTML.
    func page(_ template: String, _ values: [String: Any], status: HTTPResponse.Status = .ok, cookies: [String] = [])
        -> Response
    {
        let html =
            library.render(Self.withoutEmptyText(values), withTemplate: template)
            ?? "<!doctype html><title>Lender desk</title><p>This page is missing from this build."
        var headers = Self.headers
        headers[.contentType] = "text/html; charset=utf-8"
        for cookie in cookies { headers.append(HTTPField(name: .setCookie, value: cookie)) }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
    }

    /// The values without their empty texts: mustache takes "" as present, so `{{#x}}` would
    /// show a section for nothing and `{{^x}}` never its fallback.
    static func withoutEmptyText(_ value: Any) -> Any {
        switch value {
        case let values as [String: Any]:
            return values.compactMapValues { value -> Any? in (value as? String)?.isEmpty == true ? nil : withoutEmptyText(value) }
        case let list as [[String: Any]]:
            return list.map { withoutEmptyText($0) }
        default:
            return value
        }
    }

    /// A 303 to `location`: each act answers with the page it changed (post, redirect, get).
    static func redirect(_ location: String, cookies: [String] = []) -> Response {
        var headers = Self.headers
        headers[.location] = location
        for cookie in cookies { headers.append(HTTPField(name: .setCookie, value: cookie)) }
        return Response(status: .seeOther, headers: headers)
    }

    func css() -> Response {
        var headers = Self.headers
        headers[.contentType] = "text/css; charset=utf-8"
        headers[.cacheControl] = "public, max-age=3600"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: stylesheet))
    }
}

extension HTTPField.Name {
    static let xFrameOptions = HTTPField.Name("X-Frame-Options")!
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!
    static let xForwardedProto = HTTPField.Name("X-Forwarded-Proto")!
}

/// How the desk writes what it shows.
enum DeskFormat {
    /// `1234` as `12.34`, `-5` as `-0.05`.
    static func money(_ cents: Int?) -> String {
        guard let cents else { return "" }
        let sign = cents < 0 ? "-" : ""
        let whole = cents.magnitude
        let fraction = whole % 100
        return "\(sign)\(whole / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }

    static func time(_ date: Date?) -> String {
        guard let date else { return "" }
        return date.formatted(.iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: false).timeSeparator(.colon))
    }

    /// A personal field of a forgotten user: removed, and said so.
    static func personal(_ text: String?, forgotten: Bool) -> String {
        forgotten ? "(removed)" : text ?? ""
    }

    /// An application/x-www-form-urlencoded body: each name's first value. Control characters
    /// (NUL, which PostgreSQL's text refuses, among them) are 422 `control_character`, as in
    /// a JSON body; a line end or a tab stays.
    static func form(_ body: ByteBuffer) throws -> [String: String] {
        var fields = [String: String]()
        for pair in String(buffer: body).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decoded(_ text: Substring) -> String {
                String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            let name = decoded(parts[0])
            if fields[name] == nil { fields[name] = parts.count > 1 ? decoded(parts[1]) : "" }
        }
        let refused = fields.filter { name, value in
            (name + value).unicodeScalars.contains { $0.properties.generalCategory == .control && !"\t\n\r".unicodeScalars.contains($0) }
        }
        guard refused.isEmpty else {
            throw DomainError.invalid(
                refused.keys.sorted().map {
                    FieldError(field: $0, code: "control_character", message: "text may not hold control characters such as NUL (U+0000)")
                })
        }
        return fields
    }
}
