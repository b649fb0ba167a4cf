import JSONStream

/// The top-level members of a JSON object's text, each as its key and the byte range of its
/// value, read off the tape (`JSONDocument`) without decoding anything: sealing a few fields
/// of an event then costs neither a decode of the whole body nor its encoding again. Nil for
/// anything but one well-formed object with plain keys (no escapes), which JSONEncoder never
/// writes.
struct TopLevelFields {
    let bytes: [UInt8]
    let members: [(key: String, value: Range<Int>)]

    init?(_ text: String) {
        guard let document = try? JSONDocument(Array(text.utf8)), document.kind(document.root) == .object else { return nil }
        var members: [(key: String, value: Range<Int>)] = []
        for (key, value) in document.members(of: document.root) {
            guard document.isPlain(key), let name = document.string(key) else { return nil }
            members.append((name, document.range(value)))
        }
        self.bytes = document.bytes
        self.members = members
    }

    func value(_ key: String) -> ArraySlice<UInt8>? {
        members.first { $0.key == key }.map { bytes[$0.value] }
    }

    /// The text with some values replaced (by key).
    func replacing(_ replacements: [String: String]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count + replacements.values.reduce(0) { $0 + $1.utf8.count })
        var copied = 0
        for member in members.sorted(by: { $0.value.lowerBound < $1.value.lowerBound }) {
            guard let replacement = replacements[member.key] else { continue }
            out += bytes[copied..<member.value.lowerBound]
            out += replacement.utf8
            copied = member.value.upperBound
        }
        out += bytes[copied...]
        return String(decoding: out, as: UTF8.self)
    }
}
