import Foundation
import Mustache

/// The mails' words, as files (`Templates/*.mustache`, English): for each kind a subject, a
/// plain-text body and an HTML one. Values are escaped for HTML in the HTML body only.
public struct MailTemplates: Sendable {
    let library: MustacheLibrary

    /// The templates built with the binary, from `lender_Mail.resources` beside it; none when
    /// that folder is missing (`lender serve` then refuses to start).
    public static let bundled: MailTemplates = {
        var library = MustacheLibrary()
        var names: [String] = []
        let files = bundledFolder.flatMap { try? FileManager.default.contentsOfDirectory(at: $0, includingPropertiesForKeys: nil) } ?? []
        for file in files where file.pathExtension == "mustache" {
            // A template that does not parse is a defect of the build: its mail is then empty.
            if let text = try? String(contentsOf: file, encoding: .utf8) {
                try? library.register(text, named: file.deletingPathExtension().lastPathComponent)
                names.append(file.deletingPathExtension().lastPathComponent)
            }
        }
        return MailTemplates(library: library, names: Set(names))
    }()

    /// SwiftPM's bundle of `Templates`, found by hand as the migrations are (`Bundle.module`'s
    /// accessor stops the process when the folder is missing: a release unpacked without it
    /// died at its first mail).
    static let bundledFolder: URL? = {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        return [executable, Bundle.main.bundleURL]
            .map { $0.appendingPathComponent("lender_Mail.resources/Templates") }
            .first { FileManager.default.fileExists(atPath: $0.path) }
    }()

    /// The templates' names (`password_reset_subject`, ...).
    public let names: Set<String>

    public struct Rendered: Sendable, Hashable {
        public var subject: String
        public var text: String
        public var html: String
    }

    /// One template, `name`, with `values`, trimmed (a push's title, say).
    public func line(_ name: String, _ values: [String: String]) -> String {
        (library.render(values, withTemplate: name) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `kind`'s three parts (`password_reset`, `email_verification`) with `values`.
    public func render(_ kind: String, _ values: [String: String]) -> Rendered {
        func part(_ name: String) -> String { library.render(values, withTemplate: "\(kind)_\(name)") ?? "" }
        return Rendered(
            subject: part("subject").trimmingCharacters(in: .whitespacesAndNewlines), text: part("text"), html: part("html"))
    }
}
