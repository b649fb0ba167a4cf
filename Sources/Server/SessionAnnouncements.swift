import Logging
import Postgres
import ServiceLifecycle
import UseCases

/// Listens for the database's announcements of changed sessions (migration 0014) and makes the
/// session cache forget them: a logout on any server ends the session on every server at once.
/// Announcements missed while the listener reconnects are made up for by forgetting everything.
struct SessionAnnouncements: Service {
    let sessions: SessionCache
    let configuration: PostgresConfiguration
    let logger: Logger

    func run() async throws {
        let listener = PostgresListener(configuration: configuration, channels: [SessionCache.channel], logger: logger)
        for await event in listener.events().cancelOnGracefulShutdown() {
            switch event {
            case .listening: sessions.forgetAll()
            case .notification(let notification): sessions.forget(announced: notification.payload)
            }
        }
    }
}
