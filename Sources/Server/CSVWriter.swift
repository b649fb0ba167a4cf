/// CSV as RFC 4180 writes it, for the operators' exports: records end in CRLF; a cell holding
/// a comma, a double quote, CR or LF is quoted, its quotes doubled. And a cell that a
/// spreadsheet would run as a formula is disarmed (OWASP's CSV injection): one starting with
/// `=`, `+`, `-`, `@`, a tab or CR gets a `'` before it, which spreadsheets show as text.
/// A title like `=HYPERLINK("http://x")` is a user's, and an operator opens the file.
///
/// The guard is for every cell, numbers included: the exports write no negative number (an
/// amount's direction is a column of its own), so no figure turns into text.
struct CSVWriter {
    private(set) var bytes: [UInt8] = []

    var isEmpty: Bool { bytes.isEmpty }

    /// One record: `cells` joined by commas, then CRLF.
    mutating func append(_ cells: [String]) {
        for (index, cell) in cells.enumerated() {
            if index > 0 { bytes.append(Self.comma) }
            Self.append(cell, to: &bytes)
        }
        bytes.append(Self.cr)
        bytes.append(Self.lf)
    }

    /// What was written since the last `take`; the writer starts again empty.
    mutating func take() -> [UInt8] {
        let taken = bytes
        bytes = []
        bytes.reserveCapacity(taken.count)
        return taken
    }

    /// One record as text.
    static func row(_ cells: [String]) -> String {
        var writer = CSVWriter()
        writer.append(cells)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    static func append(_ cell: String, to bytes: inout [UInt8]) {
        let utf8 = cell.utf8
        let disarmed = utf8.first.map(startsFormula) ?? false
        let doubled = utf8.contains(quote)
        let quoted = doubled || utf8.contains { $0 == comma || $0 == cr || $0 == lf }
        if quoted { bytes.append(quote) }
        if disarmed { bytes.append(apostrophe) }
        if doubled {
            for byte in utf8 {
                if byte == quote { bytes.append(quote) }
                bytes.append(byte)
            }
        } else {
            // Most cells: copied whole, not byte by byte.
            bytes.append(contentsOf: utf8)
        }
        if quoted { bytes.append(quote) }
    }

    /// The first characters OWASP lists as starting a formula.
    static func startsFormula(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "="), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "@"), 0x09, cr: true
        default: false
        }
    }

    static let comma = UInt8(ascii: ",")
    static let quote = UInt8(ascii: "\"")
    static let apostrophe = UInt8(ascii: "'")
    static let cr = UInt8(ascii: "\r")
    static let lf = UInt8(ascii: "\n")
}
