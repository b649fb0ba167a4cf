import Foundation
import Marketplace
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The receivers webhooks may reach (`WEBHOOK_ALLOWED_HOSTS`, SPEC §12.6), checked when an
/// endpoint is registered and again before every round of sending, so that a name that
/// resolves elsewhere since (DNS rebinding) is caught.
///
/// Entries, separated by commas: a host by name or address (`hooks.example.com`,
/// `10.0.0.7`), `*.example.com` for any name under it, `*` for any host. A host reached
/// through `*` or `*.…` must resolve to public addresses only: never loopback, private,
/// link-local (the cloud's metadata service at 169.254.169.254), unspecified or multicast.
/// A host listed by its own name or address is trusted wherever it points: that is how an
/// operator allows a receiver on the private network.
public struct WebhookHosts: Sendable, Hashable {
    private var exact: Set<String> = []
    /// `.example.com` for `*.example.com`.
    private var suffixes: Set<String> = []
    private var anyHost = false

    public init(_ entries: some Sequence<String>) {
        for entry in entries {
            let name = Self.normalized(entry)
            if name.isEmpty { continue }
            if name == "*" {
                anyHost = true
            } else if name.hasPrefix("*.") {
                suffixes.insert(String(name.dropFirst()))
            } else {
                exact.insert(name)
            }
        }
    }

    /// `WEBHOOK_ALLOWED_HOSTS` as written: entries separated by commas.
    public init(list: String) {
        self.init(list.split(separator: ",").map(String.init))
    }

    /// No host is allowed: no endpoint can be registered, and none is sent to.
    public var isEmpty: Bool { exact.isEmpty && suffixes.isEmpty && !anyHost }

    /// Where `url` may be posted: its host allowed, and for a host not listed by name, every
    /// address it resolves to public, one of them to connect to. 422 `invalid_url`,
    /// `host_not_allowed` or `host_unresolvable` otherwise.
    public func check(_ url: String) async throws -> WebhookDestination {
        guard let host = Self.host(of: url) else { throw Self.invalidURL }
        let name = Self.normalized(host)
        if exact.contains(name) {
            // A listed name may point anywhere but at this machine or the cloud's metadata
            // service (a partner's DNS changed): only a listed address reaches those.
            guard !Self.isLiteralAddress(name) else { return WebhookDestination(host: host, address: nil) }
            let addresses = try await Self.addresses(of: host)
            if let inward = addresses.first(where: { $0.isLoopbackOrLinkLocal }) {
                throw Self.notAllowed("\(name) resolves to \(inward): loopback and link-local addresses are reached only when listed as addresses.")
            }
            guard let first = addresses.first else { throw Self.unresolvable("\(name) has no address.") }
            // Pinned: the connection goes where the check looked, not to a second answer.
            return WebhookDestination(host: host, address: first.description)
        }
        guard anyHost || suffixes.contains(where: { name.hasSuffix($0) }) else {
            throw Self.notAllowed("\(name) is not one of the hosts WEBHOOK_ALLOWED_HOSTS allows.")
        }
        let addresses = try await Self.addresses(of: host)
        if let forbidden = addresses.first(where: { !$0.isPublic }) {
            throw Self.notAllowed(
                "\(name) resolves to \(forbidden): a loopback, private, link-local, unspecified or multicast address.")
        }
        guard let first = addresses.first else {
            throw Self.unresolvable("\(name) has no address.")
        }
        return WebhookDestination(host: host, address: first.description)
    }

    /// The URL's host, as the HTTP client reads it (brackets of an IPv6 address taken off);
    /// nil unless it is an absolute `http` or `https` URL with a host and no user or password.
    public static func host(of text: String) -> String? {
        // A port past 65535 would trap where the HTTP client makes its socket address.
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            url.user == nil, url.password == nil, var host = url.host, !host.isEmpty, (url.port ?? 1).isValidPort
        else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : host
    }

    /// An IPv4 or IPv6 address written out, not a name.
    static func isLiteralAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// A host as entries and URLs are compared: lower case, without brackets or a final dot.
    static func normalized(_ text: String) -> String {
        var name = text.trimmingCharacters(in: .whitespaces).lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.count > 1, name.hasSuffix(".") { name = String(name.dropLast()) }
        return name
    }

    static let invalidURL = DomainError.invalid([
        FieldError(
            field: "url", code: "invalid_url", message: "an http or https URL with a host, a port from 1 to 65535 if any, and no user or password")
    ])

    static func notAllowed(_ message: String) -> DomainError {
        DomainError(.invalid, "host_not_allowed", message, fields: [FieldError(field: "url", code: "host_not_allowed", message: message)])
    }

    static func unresolvable(_ message: String) -> DomainError {
        DomainError(.invalid, "host_unresolvable", message, fields: [FieldError(field: "url", code: "host_unresolvable", message: message)])
    }

    /// Every address `host` resolves to (a literal address: itself), by the system's resolver,
    /// on NIO's thread pool: `getaddrinfo` blocks.
    static func addresses(of host: String) async throws -> [WebhookAddress] {
        try await NIOThreadPool.singleton.runIfActive { try Self.resolve(host) }
    }

    private static func resolve(_ host: String) throws -> [WebhookAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0, let first = list else {
            throw unresolvable("\(host) does not resolve (\(String(cString: gai_strerror(status)))).")
        }
        defer { freeaddrinfo(first) }
        var addresses: [WebhookAddress] = []
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let info = next {
            next = info.pointee.ai_next
            guard let socketAddress = info.pointee.ai_addr else { continue }
            let address: WebhookAddress
            switch info.pointee.ai_family {
            case AF_INET:
                let v4 = UnsafeRawPointer(socketAddress).load(as: sockaddr_in.self)
                address = WebhookAddress(bytes: withUnsafeBytes(of: v4.sin_addr) { Array($0) })
            case AF_INET6:
                let v6 = UnsafeRawPointer(socketAddress).load(as: sockaddr_in6.self)
                address = WebhookAddress(bytes: withUnsafeBytes(of: v6.sin6_addr) { Array($0) })
            default:
                continue
            }
            // One entry a socket type: the same address comes several times.
            if !addresses.contains(address) { addresses.append(address) }
        }
        return addresses
    }
}

/// Where a round posts: the URL's host, and the checked address to connect to in place of
/// looking the name up again (nil for a host listed by name, looked up as usual).
public struct WebhookDestination: Sendable, Hashable {
    public var host: String
    public var address: String?

    public init(host: String, address: String?) {
        self.host = host
        self.address = address
    }
}

/// An IPv4 (4 bytes) or IPv6 (16 bytes) address, in network order.
public struct WebhookAddress: Sendable, Hashable, CustomStringConvertible {
    public var bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// Reachable on the internet: none of the ranges a request from the server must never
    /// reach unless an operator named the host.
    public var isPublic: Bool {
        if bytes.count == 4 { return Self.isPublicV4(bytes[0], bytes[1], bytes[2], bytes[3]) }
        guard bytes.count == 16 else { return false }
        let b = bytes
        // ::ffff:a.b.c.d (mapped) and 64:ff9b::a.b.c.d (NAT64): the IPv4 address inside.
        if b[0..<10].allSatisfy({ $0 == 0 }), b[10] == 0xff, b[11] == 0xff { return Self.isPublicV4(b[12], b[13], b[14], b[15]) }
        if b[0] == 0x00, b[1] == 0x64, b[2] == 0xff, b[3] == 0x9b, b[4..<12].allSatisfy({ $0 == 0 }) {
            return Self.isPublicV4(b[12], b[13], b[14], b[15])
        }
        // 64:ff9b:1::/48 (NAT64 for local use), 2001::/32 (Teredo) and ::ffff:0:0:0/96 (SIIT).
        if b[0] == 0x00, b[1] == 0x64, b[2] == 0xff, b[3] == 0x9b, b[4] == 0x00, b[5] == 0x01 { return false }
        if b[0] == 0x20, b[1] == 0x01, b[2] == 0x00, b[3] == 0x00 { return false }
        if b[0..<8].allSatisfy({ $0 == 0 }), b[8] == 0xff, b[9] == 0xff, b[10] == 0, b[11] == 0 { return false }
        // 6to4 (2002::/16) carries an IPv4 address in its next 32 bits.
        if b[0] == 0x20, b[1] == 0x02 { return Self.isPublicV4(b[2], b[3], b[4], b[5]) }
        if b[0..<12].allSatisfy({ $0 == 0 }) { return false }  // ::, ::1 and the old IPv4-compatible ::a.b.c.d
        if b[0] & 0xfe == 0xfc { return false }  // fc00::/7, unique local
        if b[0] == 0xfe, b[1] & 0xc0 == 0x80 { return false }  // fe80::/10, link-local
        if b[0] == 0xfe, b[1] & 0xc0 == 0xc0 { return false }  // fec0::/10, site-local (deprecated)
        if b[0] == 0xff { return false }  // ff00::/8, multicast
        return true
    }

    /// 127.0.0.0/8, 169.254.0.0/16, ::1, fe80::/10, and those inside mapped addresses.
    public var isLoopbackOrLinkLocal: Bool {
        // 0.0.0.0/8 and :: reach this machine too, on Linux.
        func v4(_ a: UInt8, _ b: UInt8) -> Bool { a == 0 || a == 127 || (a == 169 && b == 254) }
        if bytes.count == 4 { return v4(bytes[0], bytes[1]) }
        guard bytes.count == 16 else { return false }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff { return v4(bytes[12], bytes[13]) }
        if bytes[0..<15].allSatisfy({ $0 == 0 }), bytes[15] <= 1 { return true }
        return bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80
    }

    static func isPublicV4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> Bool {
        switch (a, b) {
        case (0, _): false  // "this network", 0.0.0.0 included
        case (10, _): false  // private
        case (100, 64...127): false  // shared address space (carrier-grade NAT)
        case (127, _): false  // loopback
        case (169, 254): false  // link-local, the cloud's metadata service among them
        case (172, 16...31): false  // private
        case (192, 0) where c == 0: false  // IETF protocol assignments
        case (192, 168): false  // private
        case (198, 18...19): false  // benchmarking
        case (224...255, _): false  // multicast, reserved, broadcast
        default: true
        }
    }

    /// `10.0.0.1`, or eight groups of hexadecimal digits: a literal every resolver reads.
    public var description: String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: bytes.count, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }
}

extension Int {
    var isValidPort: Bool { (1...65_535).contains(self) }
}
