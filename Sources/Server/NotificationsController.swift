import Foundation
import Hummingbird
import Mail
import Marketplace
import Projections
import UseCases

/// Notices outside the app (SPEC §12.4): each kind's channels, the devices pushes go to, and
/// the one-click unsubscribe link every mail carries.
struct NotificationsController: Sendable {
    let settings: NotificationSettings
    let devices: Devices
    let unsubscribe: UnsubscribeTokens

    /// Every kind, `{"bid_received": {"email": true, "push": true}, ...}`, in the kinds' order.
    struct Settings: ResponseEncodable {
        var channels: [NoticeKind: NoticeChannels]

        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            for kind in NoticeKind.allCases {
                try container.encode(channels[kind] ?? NotificationSettings.defaults[kind]!, forKey: Key(stringValue: kind.rawValue))
            }
        }
    }

    @Sendable func show(_ request: Request, context: UserContext) async throws -> Settings {
        Settings(channels: try await settings.of(context.user))
    }

    /// `{"bid_received": {"email": false}}`: the kinds and channels named change, the rest stay.
    @Sendable func change(_ request: Request, context: UserContext) async throws -> Settings {
        let body = try await request.decodeBody([String: [String: Bool]].self, context: context)
        var problems = [FieldError]()
        var changes = [NoticeKind: NotificationSettings.Change]()
        for (name, channels) in body.sorted(by: { $0.key < $1.key }) {
            guard let kind = NoticeKind(rawValue: name) else {
                problems.append(FieldError(field: name, code: "unknown_field", message: "not a kind of notice"))
                continue
            }
            for channel in channels.keys.sorted() where channel != "email" && channel != "push" {
                problems.append(FieldError(field: "\(name).\(channel)", code: "unknown_field", message: "email or push"))
            }
            changes[kind] = NotificationSettings.Change(email: channels["email"], push: channels["push"])
        }
        guard problems.isEmpty else { throw DomainError.invalid(Array(problems.prefix(20))) }
        return Settings(channels: try await settings.change(context.user, changes))
    }

    struct DeviceBody: Decodable {
        var platform: String?
        var token: String?
    }

    struct DeviceResource: ResponseEncodable {
        var token: String
        var platform: String
        var createdAt: Date

        init(_ device: Device) {
            token = device.token
            platform = device.platform.rawValue
            createdAt = device.createdAt
        }
    }

    struct DeviceList: ResponseEncodable {
        var devices: [DeviceResource]
    }

    @Sendable func register(_ request: Request, context: UserContext) async throws -> EditedResponse<DeviceResource> {
        let body = try await request.decodeBody(DeviceBody.self, context: context)
        var fields = FieldCheck()
        fields.require(("platform", body.platform), ("token", body.token))
        let parsedPlatform = body.platform.flatMap(Device.Platform.init(rawValue:))
        if body.platform != nil, parsedPlatform == nil {
            fields.problems.append(FieldError(field: "platform", code: "invalid_platform", message: "ios or android"))
        }
        if let token = body.token {
            do { try Devices.validate(token: token) } catch let error as DomainError { fields.problems += error.fields }
        }
        let (token, platform) = try fields.checked(body.token, parsedPlatform)
        let device = try await devices.register(token, platform: platform, for: context.user)
        return EditedResponse(status: .created, response: DeviceResource(device))
    }

    @Sendable func list(_ request: Request, context: UserContext) async throws -> DeviceList {
        DeviceList(devices: try await devices.of(context.user).map(DeviceResource.init))
    }

    @Sendable func remove(_ request: Request, context: UserContext) async throws -> HTTPResponse.Status {
        let token = try context.parameters.require("token")
        // No token this server takes (a NUL, 10,000 bytes) names any device.
        guard (try? Devices.validate(token: token)) != nil else {
            throw DomainError(.notFound, "device_not_found", "No device of yours has this token.")
        }
        try await devices.remove(token, of: context.user)
        return .noContent
    }

    static let tokenInvalid = DomainError(.gone, "token_invalid", "This unsubscribe link is not one Lender made.")

    /// The link in a mail, opened in a browser: a page with one button, since a GET must not
    /// unsubscribe (mail scanners open links).
    @Sendable func page(_ request: Request, context: AppRequestContext) async throws -> Response {
        let token = try Self.token(request)
        guard unsubscribe.open(token) != nil else { throw Self.tokenInvalid }
        return Self.html(MailTemplates.bundled.line("unsubscribe_page", ["token": token]))
    }

    /// RFC 8058's one-click POST (`List-Unsubscribe=One-Click`), or the page's button: no more
    /// mail of the link's kind.
    @Sendable func unsubscribe(_ request: Request, context: AppRequestContext) async throws -> Response {
        let token = try Self.token(request)
        guard let (user, kind) = unsubscribe.open(token) else { throw Self.tokenInvalid }
        try await settings.unsubscribe(user, from: kind)
        return Self.html(MailTemplates.bundled.line("unsubscribe_page", ["token": token, "done": "yes"]))
    }

    /// The link's `token`: 422 when there is none, or one longer than any this server signs.
    static func token(_ request: Request) throws -> String {
        guard let token = request.uri.queryParameters["token"].map(String.init), !token.isEmpty else {
            throw DomainError.invalid([FieldError(field: "token", code: "required", message: "token is required")])
        }
        guard token.utf8.count <= 200 else {
            throw DomainError.invalid([FieldError(field: "token", code: "too_long", message: "at most 200 characters")])
        }
        return token
    }

    static func html(_ page: String) -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store", .init("Referrer-Policy")!: "no-referrer"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: page)))
    }
}
