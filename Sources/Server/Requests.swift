import Foundation
import Hummingbird
import HummingbirdCore
import JSONStream
import Synchronization
import NIOCore
import Marketplace
import Projections
import UUIDs

extension Request {
    /// The JSON body as `T`, or a problem: 413 when too large, 400 when not JSON of that shape.
    func decodeBody<T: Decodable>(_ type: T.Type, context: some RequestContext) async throws -> T {
        // Not allowing an empty body, nil never comes back: an empty body is malformed JSON.
        try await decodeBody(type, context: context, allowEmpty: false)!
    }

    /// Like `decodeBody`; with `allowEmpty`, nil when there is no body.
    func decodeBody<T: Decodable>(_ type: T.Type, context: some RequestContext, allowEmpty: Bool) async throws -> T? {
        var request = self
        let buffer = try await request.collectBodyWithinLimit(context: context)
        if allowEmpty, buffer.readableBytes == 0 { return nil }
        // Read through one contiguous pointer: a ByteBufferView walked byte by byte costs a
        // bounds-checked call per byte, seconds for a 1 MiB body in a debug build.
        let keys = try buffer.withUnsafeReadableBytes { bytes in
            try JSONShape.checkedBody.flatMap { $0.keys(of: bytes) } ?? JSONShape.check(Array(bytes))
        }
        let value: T
        let body = Self.composed(buffer)
        do {
            do {
                value = try JSONDecoder().decode(type, from: body)
            } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
                // Foundation names no field for a number that does not fit one (`1.5` where a
                // whole number goes): JSONStream's decoder does, and refuses what this did.
                _ = try JSONStream.decode(type, from: body)
                throw DecodingError.dataCorrupted(context)
            }
        } catch let DecodingError.typeMismatch(expected, context) {
            // The right JSON, a field of the wrong type: name it.
            let field = Self.fieldName(context.codingPath)
            throw Problem(
                .badRequest, code: "malformed_body", detail: "\(field.isEmpty ? "The body" : field) must be \(Self.jsonType(expected)).",
                errors: [FieldError(field: field.isEmpty ? "body" : field, code: "wrong_type", message: "must be \(Self.jsonType(expected))")])
        } catch let DecodingError.dataCorrupted(context) where !context.codingPath.isEmpty {
            // A number that does not fit the field (`1.5` where a whole number goes): name it too.
            let field = Self.fieldName(context.codingPath)
            throw Problem(
                .badRequest, code: "malformed_body", detail: "\(field) must be a whole number in range.",
                errors: [FieldError(field: field, code: "wrong_type", message: "must be a whole number in range")])
        } catch {
            throw Problem(.badRequest, code: "malformed_body", detail: "The body is not the JSON object this route takes.")
        }
        try Self.refuseUnknown(keys, of: value)
        return value
    }

    /// A field's path as the problem names it: `location.lat`, `lines[2].amountCents`.
    static func fieldName(_ path: [any CodingKey]) -> String {
        path.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
    }

    /// The body with its text in Unicode's composed form (NFC), as every text is kept: a name
    /// or title typed on a keyboard that decomposes (`e` + U+0301) is the one typed composed,
    /// and found by it. Structure is ASCII, so composing the whole text composes each string;
    /// an ASCII body (most) is passed as it is, and bytes that are not UTF-8 too, for the
    /// decoder to refuse (decoding them here would turn them into U+FFFD silently).
    static func composed(_ buffer: ByteBuffer) -> Data {
        buffer.withUnsafeReadableBytes { bytes in
            guard bytes.contains(where: { $0 >= 0x80 }), let text = String(validating: bytes, as: UTF8.self) else {
                return Data(bytes)
            }
            return Data(text.precomposedStringWithCanonicalMapping.utf8)
        }
    }

    /// A field the route does not take is refused (422 naming each), not silently dropped: a
    /// client that misspells one, or sends it to the wrong route, learns so at once. The
    /// route's fields are its body type's properties (plain structs of optionals).
    static func refuseUnknown<T: Decodable>(_ keys: Set<String>, of value: T) throws {
        // Every body of a route names fields of its type: once seen, a field is known without
        // reflecting again (a `Mirror` a request was a tenth of a command's time, `perf`).
        if keys.isSubset(of: knownFields.withLock({ $0[ObjectIdentifier(T.self)] ?? [] })) { return }
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .struct, !mirror.children.isEmpty else { return }
        var known = Set<String>()
        collectFields(of: value, prefix: "", into: &known)
        knownFields.withLock { $0[ObjectIdentifier(T.self), default: []].formUnion(known) }
        let unknown = keys.subtracting(known).sorted()
        guard !unknown.isEmpty else { return }
        // Twenty named at most: a body of a thousand made-up keys gets a short answer.
        var errors = unknown.prefix(20).map { FieldError(field: $0, code: "unknown_field", message: "not a field of this request") }
        if unknown.count > 20 {
            errors.append(FieldError(field: "body", code: "unknown_fields", message: "and \(unknown.count - 20) more fields it does not take"))
        }
        throw DomainError.invalid(errors)
    }

    /// The fields of each body type named so far: a nested struct's are only seen in a body
    /// that holds it, so this grows to the type's whole set as bodies arrive.
    private static let knownFields = Mutex<[ObjectIdentifier: Set<String>]>([:])

    /// Every field of a body type, nested ones as `location.lat`: its stored properties, and
    /// those of any struct among them (an absent optional one has none to name).
    private static func collectFields(of value: Any, prefix: String, into known: inout Set<String>) {
        var mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .optional {
            guard let wrapped = mirror.children.first?.value else { return }
            mirror = Mirror(reflecting: wrapped)
        }
        guard mirror.displayStyle == .struct else { return }
        for child in mirror.children {
            guard let label = child.label else { continue }
            known.insert(prefix + label)
            collectFields(of: child.value, prefix: prefix + label + ".", into: &known)
        }
    }

    /// A Swift type as the JSON a client should send instead.
    static func jsonType(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type: "an integer"
        case is Double.Type, is Float.Type: "a number"
        case is Bool.Type: "true or false"
        case is [Any].Type: "an array"
        default: "an object"
        }
    }

    /// Collects the body (keeping it readable for later decoding), or a 413 problem past the limit.
    mutating func collectBodyWithinLimit(context: some RequestContext) async throws -> ByteBuffer {
        do {
            return try await collectBody(upTo: context.maxUploadSize)
        } catch {
            let limit = context.maxUploadSize
            let size = limit % (1024 * 1024) == 0 ? "\(limit / (1024 * 1024)) MiB" : "\(limit / 1024) KiB"
            throw Problem(.contentTooLarge, code: "body_too_large", detail: "The body is larger than \(size).")
        }
    }
}

/// Bounds on a body's shape, checked before any decoding: no command nests deeper than a few
/// levels or needs a string longer than a description, so deeper or longer is refused at
/// once (400), whatever the route, rather than handed to the decoder. A key twice in one
/// object is refused too (400 naming it): parsers disagree on which value wins, so two
/// readers of one body (the route and the idempotency digest, say) could see two requests.
enum JSONShape {
    static let maxDepth = 32
    static let maxStringBytes = 20_000
    /// Members and elements in all: no route takes more than about fifty, and a megabyte of
    /// them cost the decoder 54 to 130 ms of a cooperative thread (issue 48).
    static let maxValues = 1_000

    static let limits = JSONDocument.Limits(depth: maxDepth, stringBytes: maxStringBytes, values: maxValues)

    /// A body checked in this request: its keys, and the body read onto the tape.
    /// `IdempotencyMiddleware` reads the body before the route does, and digests this; the
    /// route's `decodeBody` does not scan it again.
    struct CheckedBody: Sendable {
        let bytes: [UInt8]
        let keys: Set<String>
        /// Nil for a body that is empty or not JSON: the middleware digests its bytes, and a
        /// route that reads it refuses it (`check`).
        let document: JSONDocument?

        /// The body checked: its shape refused (400, 422) as `check` says; one that is not
        /// JSON passed on, since a route that takes no body may be sent anything.
        init(_ bytes: [UInt8]) throws {
            self.bytes = bytes
            (keys, document) = try JSONShape.read(bytes) ?? ([], nil)
        }

        /// The keys found, when `other` holds these very bytes (one `memcmp`): any other body,
        /// or one that was not JSON, is checked anew.
        func keys(of other: UnsafeRawBufferPointer) -> Set<String>? {
            guard document != nil || bytes.isEmpty, other.count == bytes.count else { return nil }
            let same = bytes.withUnsafeBytes { mine in mine.count == 0 || memcmp(mine.baseAddress!, other.baseAddress!, mine.count) == 0 }
            return same ? keys : nil
        }
    }

    @TaskLocal static var checkedBody: CheckedBody?

    /// Checks the body's shape; returns the keys of its objects, nested ones as `location.lat`
    /// (not those inside arrays). A body that is not JSON (UTF-8, RFC 8259) is refused, 400:
    /// whatever else the decoder would take (a byte-order mark, UTF-16) would pass unchecked.
    /// An empty one passes with none, for a route whose body is optional.
    @discardableResult
    static func check(_ bytes: [UInt8]) throws -> Set<String> {
        if let read = try read(bytes) { return read.keys }
        guard bytes.isEmpty else {
            throw Problem(.badRequest, code: "malformed_body", detail: "The body is not JSON (RFC 8259, in UTF-8).")
        }
        return []
    }

    /// The body read onto the tape (`JSONDocument`), within `limits`, then walked for what
    /// the tape does not refuse itself: a key twice in one object, a control character in
    /// text. Nil when it is not JSON.
    private static func read(_ bytes: [UInt8]) throws -> (keys: Set<String>, document: JSONDocument)? {
        let document: JSONDocument
        do {
            document = try JSONDocument(bytes, limits: limits)
        } catch let exceeded as JSONDocument.LimitExceeded {
            switch exceeded {
            case .depth: throw Problem(.badRequest, code: "too_deeply_nested", detail: "The body nests deeper than \(maxDepth) levels.")
            case .stringBytes:
                throw Problem(.badRequest, code: "string_too_long", detail: "A string in the body is longer than \(maxStringBytes) bytes.")
            case .values:
                throw Problem(.badRequest, code: "too_many_values", detail: "The body holds more than \(maxValues) members and elements.")
            }
        } catch {
            return nil
        }
        var keys: Set<String> = []
        try walk(document, document.root, path: [], inArray: false, &keys)
        return (keys, document)
    }

    /// `value` and what it holds. `path`: its objects' keys (arrays add none); `inArray`
    /// when an array holds it, whose objects' keys are not the body's fields.
    private static func walk(_ document: JSONDocument, _ value: Int, path: [String], inArray: Bool, _ keys: inout Set<String>) throws {
        switch document.kind(value) {
        case .string:
            try refuseControlCharacter(document, value, path)
        case .array:
            for element in document.elements(of: value) { try walk(document, element, path: path, inArray: true, &keys) }
        case .object:
            var seen: Set<String> = []
            for (key, member) in document.members(of: value) {
                try refuseControlCharacter(document, key, path)
                // Escapes are read as the decoder reads them: `"a"` and `"\u0061"` are one key.
                let name = document.string(key) ?? String(decoding: document.written(key), as: UTF8.self)
                guard seen.insert(name).inserted else {
                    throw Problem(
                        .badRequest, code: "duplicate_key", detail: "The key \"\(name)\" appears twice in one object of the body.",
                        errors: [FieldError(field: name, code: "duplicate_key", message: "\(name) is given twice")])
                }
                if !inArray { keys.insert((path + [name]).joined(separator: ".")) }
                try walk(document, member, path: path + [name], inArray: inArray, &keys)
            }
        case .null, .bool, .number:
            break
        }
    }

    /// A control character in text (NUL above all: PostgreSQL's text cannot hold it, and C
    /// strings end there) is refused, 422 naming the field; tab, line feed and carriage
    /// return are text. Written raw (DEL, a C1 control in UTF-8: C2 80 to C2 9F; the tape
    /// refuses the rest) or escaped (`\u0000`, `\b`, `\f`).
    private static func refuseControlCharacter(_ document: JSONDocument, _ string: Int, _ path: [String]) throws {
        let holdsOne: Bool
        if document.isPlain(string) {
            var previous: UInt8 = 0
            holdsOne = document.written(string).contains { byte in
                defer { previous = byte }
                return byte == 0x7F || (previous == 0xC2 && (0x80...0x9F).contains(byte))
            }
        } else {
            // A string that is not text is the decoder's to refuse.
            holdsOne = document.string(string)?.unicodeScalars.contains { $0.isControl && !"\t\n\r".unicodeScalars.contains($0) } ?? false
        }
        guard holdsOne else { return }
        let field = path.joined(separator: ".")
        throw Problem(
            DomainError.invalid([
                FieldError(
                    field: field.isEmpty ? "body" : field, code: "control_character",
                    message: "text may not hold control characters such as NUL (U+0000)")
            ]))
    }
}

/// Field checks at the HTTP edge: presence and shape (dates, categories, locations). The
/// domain checks the rest; both report every failing field.
struct FieldCheck {
    /// The edge's own problems: any of them refuses the request.
    var problems: [FieldError] = []
    /// The domain's problems noted among them (`domain`, `alongside`), each with how many of
    /// the edge's own were noted before it: named with those when the edge refuses anyway,
    /// else left to the command's decider, which refuses it for them itself.
    private var domainNoted: [(after: Int, problem: FieldError)] = []

    /// Every problem noted, the edge's own and the domain's, in the order noted.
    var allProblems: [FieldError] {
        guard !domainNoted.isEmpty else { return problems }
        var all = [FieldError]()
        var next = 0
        for (after, problem) in domainNoted {
            while next < min(after, problems.count) {
                all.append(problems[next])
                next += 1
            }
            all.append(problem)
        }
        return all + problems[next...]
    }

    /// The domain's problems with a field just read, by a rule the command's decider enforces
    /// (the days a rental could be on): noted in their place among the edge's, so that a
    /// refusal of the edge's names them too, in the order the fields are read.
    mutating func domain(_ domainProblems: [FieldError]) {
        let after = problems.count
        domainNoted += domainProblems.map { (after: after, problem: $0) }
    }

    /// The domain's problems with the fields given, when the edge refuses anyway (or noted a
    /// domain problem, for which the decider refuses): every bad field is then named at once,
    /// not only the missing one. (When the edge finds nothing, the domain checks them all
    /// itself.)
    mutating func alongside(_ domainProblems: @autoclosure () -> [FieldError]) {
        guard !problems.isEmpty || !domainNoted.isEmpty else { return }
        let named = Set(allProblems.map(\.field))
        domain(domainProblems().filter { !named.contains($0.field) })
    }

    mutating func require(_ fields: (String, Any?)...) {
        for (name, value) in fields where value == nil {
            problems.append(FieldError(field: name, code: "required", message: "\(name) is required"))
        }
    }

    /// A day, as YYYY-MM-DD.
    mutating func day(_ text: String?, _ field: String, required: Bool) -> Day? {
        guard let text else {
            if required { problems.append(FieldError(field: field, code: "required", message: "\(field) is required")) }
            return nil
        }
        guard let day = Day(text) else {
            problems.append(FieldError(field: field, code: "invalid_date", message: "a date as YYYY-MM-DD"))
            return nil
        }
        return day
    }

    /// A day just read (if any), judged by the domain's rule of the days a rental could be on
    /// (`ItemDecider.bookableProblems`, as of `today`, the clock's day): the command's decider
    /// enforces it; here it is only named with the edge's own problems.
    mutating func bookable(_ day: Day?, _ field: String, today: Day) {
        domain(ItemDecider.bookableProblems(day, field: field, today: today))
    }

    /// An instant as RFC 3339, from 1900 to 2200; nil when not given.
    mutating func timestamp(_ text: String?, _ field: String) -> Date? {
        guard let text else { return nil }
        guard let date = RFC3339.date(text) else {
            problems.append(FieldError(field: field, code: "invalid_time", message: "an RFC 3339 time, from 1900 to 2200"))
            return nil
        }
        return date
    }

    mutating func category(_ text: String?) -> Marketplace.Category? {
        guard let text else {
            problems.append(FieldError(field: "category", code: "required", message: "category is required"))
            return nil
        }
        guard let category = Marketplace.Category(rawValue: text) else {
            problems.append(
                FieldError(
                    field: "category", code: "invalid_category",
                    message: "one of \(Marketplace.Category.allCases.map(\.rawValue).joined(separator: ", "))"))
            return nil
        }
        return category
    }

    mutating func location(_ body: LocationBody?) -> Location? {
        guard let body, let lat = body.lat, let lng = body.lng else {
            problems.append(FieldError(field: "location", code: "required", message: "location with lat and lng is required"))
            return nil
        }
        // To the centimetre (1e-7 degrees): finer means nothing on a map, and a subnormal number
        // is one PostgreSQL refuses to read.
        func centimetre(_ degrees: Double) -> Double { (degrees * 1e7).rounded() / 1e7 }
        return Location(lat: centimetre(lat), lng: centimetre(lng), place: body.place ?? "")
    }

    /// A typed id, when the text is one; nil (and no problem) when absent: `require` says that.
    mutating func id<Tag>(_ text: String?, _ field: String, as: Identifier<Tag>.Type) -> Identifier<Tag>? {
        guard let text else { return nil }
        guard let id = Identifier<Tag>(text) else {
            problems.append(FieldError(field: field, code: "invalid_id", message: "\(field) is not an id"))
            return nil
        }
        return id
    }

    /// `payWith` (`balance` or `card`) and, with a card, `cardId`: the card to charge, or nil
    /// to pay from the balance.
    mutating func payingCard(_ payWith: String?, _ cardID: String?) -> CardID? {
        switch payWith {
        case "card":
            require(("cardId", cardID))
            return id(cardID, "cardId", as: CardID.self)
        case nil, "balance":
            return nil
        default:
            problems.append(FieldError(field: "payWith", code: "invalid_payment", message: "balance or card"))
            return nil
        }
    }

    /// A rental bid's `payWith`: nil when absent (the domain says whether it is needed).
    mutating func payWith(_ payWith: String?, cardID: String?) -> PayWith? {
        guard payWith != nil else {
            if cardID != nil { problems.append(FieldError(field: "cardId", code: "not_allowed", message: "only with payWith card")) }
            return nil
        }
        if payWith == "balance", cardID != nil {
            problems.append(FieldError(field: "cardId", code: "not_allowed", message: "only with payWith card"))
        }
        return payingCard(payWith, cardID).map(PayWith.card) ?? (payWith == "balance" ? .balance : nil)
    }

    /// A text field of at most `characters`.
    mutating func longest(_ value: String?, _ characters: Int, _ field: String) {
        if let value, !value.isWithin(0...characters) {
            problems.append(FieldError(field: field, code: "too_long", message: "at most \(characters) characters"))
        }
    }

    /// A field this request may not change or give.
    mutating func refuse(_ value: Any?, _ field: String, _ why: String) {
        if value != nil { problems.append(FieldError(field: field, code: "not_allowed", message: why)) }
    }

    /// Throws every problem noted, the domain's with them, when the edge has any of its own.
    func throwIfAny() throws {
        if !problems.isEmpty { throw DomainError.invalid(allProblems) }
    }

    /// The values the checks above vouched for, unwrapped, once every check has run: every
    /// problem noted is thrown first, all at once, as `throwIfAny` throws them (422
    /// `validation_failed`). So a value is nil here only when no check noted why, a bug of
    /// the route: answered 500 and logged (`Unvouched`), never a crash.
    ///
    ///     fields.require(("title", body.title))
    ///     let category = fields.category(body.category)
    ///     let (title, category) = try fields.checked(body.title, category)
    func checked<each Value>(
        _ values: repeat (each Value)?, fileID: String = #fileID, line: Int = #line
    ) throws -> (repeat each Value) {
        try throwIfAny()
        var position = 0
        func unwrapped<Wrapped>(_ value: Wrapped?) throws -> Wrapped {
            defer { position += 1 }
            guard let value else { throw Unvouched(position: position, type: "\(Wrapped.self)", fileID: fileID, line: line) }
            return value
        }
        return (repeat try unwrapped(each values))
    }

    /// A value `checked` was given nil with no problem noted: no check vouched for it.
    struct Unvouched: Error, CustomStringConvertible {
        /// Its place among `checked`'s arguments, from 0.
        var position: Int
        var type: String
        var fileID: String
        var line: Int

        var description: String {
            "FieldCheck.checked at \(fileID):\(line): value \(position) (\(type)) is nil, yet no problem was noted"
        }
    }
}

/// Refuses a query parameter holding a control character (a NUL above all, which PostgreSQL's
/// text cannot hold), and one its operation does not read (`RouteTable`), 422 naming it,
/// before any route reads it.
struct QueryTextMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let parameters = request.uri.formParameters
        guard !parameters.isEmpty else { return try await next(request, context) }
        let method = request.method == .head ? "GET" : request.method.rawValue
        let problems = RouteTable.problems(parameters, path: request.uri.path, method: method)
        if !problems.isEmpty { throw DomainError.invalid(problems) }
        return try await next(request, context)
    }
}

extension URI {
    /// The query's parameters as HTML forms and most clients encode them: `+` is a space (a
    /// plus sign is `%2B`), then percent-decoding; a malformed escape is kept as sent.
    var formParameters: [(name: String, value: String)] {
        guard let query, !query.isEmpty else { return [] }
        return query.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (Self.formDecode(parts[0]), parts.count > 1 ? Self.formDecode(parts[1]) : "")
        }
    }

    /// `+` as a space, then `%XX` as its byte: Foundation's `removingPercentEncoding`, on the
    /// bytes (through `NSString` it was 4% of a market request). A malformed escape, or bytes
    /// that are not UTF-8, leave the text as sent, with only its spaces decoded.
    static func formDecode(_ text: Substring) -> String {
        let utf8 = text.utf8
        guard utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "%") }) else { return String(text) }
        var spaced = [UInt8]()
        var decoded = [UInt8]()
        spaced.reserveCapacity(utf8.count)
        decoded.reserveCapacity(utf8.count)
        var malformed = false
        var index = utf8.startIndex
        while index != utf8.endIndex {
            let byte = utf8[index] == UInt8(ascii: "+") ? UInt8(ascii: " ") : utf8[index]
            spaced.append(byte)
            index = utf8.index(after: index)
            guard byte == UInt8(ascii: "%"), !malformed else {
                decoded.append(byte)
                continue
            }
            guard index != utf8.endIndex, let high = utf8[index].hexDigitValue,
                utf8.index(after: index) != utf8.endIndex, let low = utf8[utf8.index(after: index)].hexDigitValue
            else {
                malformed = true
                continue
            }
            decoded.append(high << 4 | low)
            spaced.append(utf8[index])
            spaced.append(utf8[utf8.index(after: index)])
            index = utf8.index(index, offsetBy: 2)
        }
        if !malformed, let text = String(validating: decoded, as: UTF8.self) { return text }
        return String(decoding: spaced, as: UTF8.self)
    }
}

extension RouteTable {
    /// What is wrong with `parameters` for the operation at `path`: control characters, else
    /// the parameters it does not read. Also what a saved search's query string is held to.
    static func problems(_ parameters: [(name: String, value: String)], path: String, method: String) -> [FieldError] {
        let refused = parameters.compactMap { name, value -> FieldError? in
            guard name.unicodeScalars.contains(where: \.isControl) || value.unicodeScalars.contains(where: \.isControl)
            else { return nil }
            return FieldError(
                field: name, code: "control_character", message: "text may not hold control characters such as NUL (U+0000)")
        }
        if !refused.isEmpty { return refused }
        // A parameter the operation does not read is a mistake (`?catgory=bikes` would answer
        // the whole market): refused, named, as an unknown field of a body is.
        guard let known = RouteTable.queryParameters(for: path, method: method) else { return [] }
        var named = Set<String>()
        return parameters.compactMap { name, _ -> FieldError? in
            guard !known.contains(name), named.insert(name).inserted else { return nil }
            return FieldError(field: name, code: "unknown_parameter", message: "this operation takes no parameter \(name)")
        }
    }
}
