import SoftchatCore

/// The account schema as versioned steps (`PRAGMA user_version`). A database at version N runs
/// steps N+1… in one transaction each; tests open a database left at every earlier version and
/// check the upgrade.
enum Migrations {
    static let steps: [String] = [
        // 1: events, tags, quarantine, deletions, ingestion receipts
        """
        CREATE TABLE events (
            id TEXT PRIMARY KEY NOT NULL,
            pubkey TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            kind INTEGER NOT NULL,
            d_tag TEXT,
            expires_at INTEGER,
            deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),
            received_at INTEGER NOT NULL,
            json TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX events_author_kind_time ON events (pubkey, kind, created_at);
        CREATE INDEX events_kind_time ON events (kind, created_at);
        CREATE INDEX events_time ON events (created_at);
        CREATE TABLE event_tags (
            event_id TEXT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            value TEXT NOT NULL
        );
        CREATE INDEX event_tags_lookup ON event_tags (name, value, event_id);
        CREATE INDEX event_tags_event ON event_tags (event_id);
        CREATE TABLE quarantine (
            key TEXT PRIMARY KEY NOT NULL,
            event_id TEXT,
            reason TEXT NOT NULL,
            raw TEXT NOT NULL,
            received_at INTEGER NOT NULL
        );
        CREATE TABLE deletions (
            pubkey TEXT NOT NULL,
            target TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            deletion_id TEXT NOT NULL,
            PRIMARY KEY (pubkey, target, deletion_id)
        );
        CREATE TABLE ingest_receipts (
            batch INTEGER PRIMARY KEY AUTOINCREMENT,
            received_at INTEGER NOT NULL,
            total INTEGER NOT NULL,
            inserted INTEGER NOT NULL,
            duplicates INTEGER NOT NULL,
            quarantined INTEGER NOT NULL
        );
        """,
        // 2: durable publish intent and delivery leases
        """
        CREATE TABLE publish_operations (
            operation_id TEXT PRIMARY KEY NOT NULL,
            fingerprint TEXT NOT NULL,
            created_at INTEGER NOT NULL
        );
        CREATE TABLE delivery_leases (
            lease_id TEXT PRIMARY KEY NOT NULL,
            relay_url TEXT NOT NULL,
            expires_at INTEGER NOT NULL,
            released INTEGER NOT NULL DEFAULT 0 CHECK (released IN (0, 1)),
            created_at INTEGER NOT NULL
        );
        CREATE TABLE publish_intents (
            intent_id TEXT PRIMARY KEY NOT NULL,
            operation_id TEXT NOT NULL REFERENCES publish_operations (operation_id),
            event_id TEXT NOT NULL REFERENCES events (id),
            relay_url TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('pending', 'inFlight', 'accepted', 'rejected', 'retryable')),
            category TEXT,
            message TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            lease_id TEXT REFERENCES delivery_leases (lease_id),
            sequence INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            UNIQUE (event_id, relay_url)
        );
        CREATE INDEX publish_intents_relay_state ON publish_intents (relay_url, state, sequence);
        CREATE INDEX publish_intents_lease ON publish_intents (lease_id);
        """,
        // 3: sync cursors and the subscription policy
        """
        CREATE TABLE sync_cursors (
            relay_url TEXT NOT NULL,
            subscription_id TEXT NOT NULL,
            newest_created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (relay_url, subscription_id)
        );
        CREATE TABLE subscription_policy (
            subscription_id TEXT PRIMARY KEY NOT NULL,
            filters_json TEXT NOT NULL,
            relay_url TEXT
        );
        """,
        // 4: durable sync state per (relay, subscription): the window and page in progress, so
        // a cut anywhere resumes where it was (SubscriptionSync's JSON), for the filters it is for
        """
        CREATE TABLE sync_states (
            relay_url TEXT NOT NULL,
            subscription_id TEXT NOT NULL,
            filters_json TEXT NOT NULL,
            state_json TEXT NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (relay_url, subscription_id)
        );
        """,
        // 5: a tag's event time beside it, so "the newest N events with this tag" (a chat's
        // history: #p + kind, limit) walks one index in order and stops, whatever the account holds
        """
        ALTER TABLE event_tags ADD COLUMN created_at INTEGER NOT NULL DEFAULT 0;
        UPDATE event_tags SET created_at = COALESCE((SELECT e.created_at FROM events e WHERE e.id = event_tags.event_id), 0);
        CREATE INDEX event_tags_time ON event_tags (name, value, created_at DESC, event_id);
        """,
        // 6: what each relay did with NIP-77's NEG-OPEN, so a relay without negentropy is not
        // asked again on every connection (the engine asks again after a while)
        """
        CREATE TABLE relay_negentropy (
            relay_url TEXT PRIMARY KEY NOT NULL,
            supported INTEGER NOT NULL CHECK (supported IN (0, 1)),
            checked_at INTEGER NOT NULL,
            reason TEXT NOT NULL
        );
        """,
        // 7: the live process that holds each lease (DeliveryOwner), so a dead owner's work is
        // claimed at once instead of when its lease runs out
        """
        ALTER TABLE delivery_leases ADD COLUMN owner TEXT;
        CREATE INDEX delivery_leases_live ON delivery_leases (relay_url, released, expires_at);
        """,
        // 8: the retry budget counts the relay's failure answers, not socket writes: a rate
        // limit, a timeout or a lost connection no longer uses it up (work in progress starts
        // with a fresh budget)
        """
        ALTER TABLE publish_intents ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
        """,
        // 9: the layout for a large account (see ``EventLayout``): events in a rowid table in
        // arrival order, found by a narrow index on the id's first 8 bytes; tags keyed by that
        // rowid; the conversation list and read markers (``ConversationIndex``); the last
        // reconciliation items read per filter (``ReconciliationCache``). Rebuilt in place, with foreign keys off during the step and checked before it
        // commits (``foreignKeysOffSteps``); the intents' event ids are checked by
        // `SoftchatAccount.check` instead of a foreign key, which needs a unique id index.
        """
        CREATE TABLE events_by_arrival (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL,
            id_key INTEGER NOT NULL,
            pubkey TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            kind INTEGER NOT NULL,
            d_tag TEXT,
            expires_at INTEGER,
            deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),
            received_at INTEGER NOT NULL,
            json TEXT NOT NULL
        );
        INSERT INTO events_by_arrival (id, id_key, pubkey, created_at, kind, d_tag, expires_at, deleted, received_at, json)
            SELECT id, \(EventLayout.idKeySQL("id")), pubkey, created_at, kind, d_tag, expires_at, deleted, received_at, json
            FROM events ORDER BY received_at, created_at, id;
        CREATE TABLE event_tags_by_seq (
            event_seq INTEGER NOT NULL REFERENCES events_by_arrival (seq) ON DELETE CASCADE,
            name TEXT NOT NULL,
            value TEXT NOT NULL,
            created_at INTEGER NOT NULL
        );
        INSERT INTO event_tags_by_seq (event_seq, name, value, created_at)
            SELECT n.seq, t.name, t.value, t.created_at FROM events_by_arrival n JOIN event_tags t ON t.event_id = n.id ORDER BY n.seq;
        DROP TABLE event_tags;
        DROP TABLE events;
        ALTER TABLE events_by_arrival RENAME TO events;
        ALTER TABLE event_tags_by_seq RENAME TO event_tags;
        CREATE INDEX events_id_key ON events (id_key);
        CREATE INDEX events_author_kind_time ON events (pubkey, kind, created_at);
        CREATE INDEX events_kind_time ON events (kind, created_at);
        CREATE INDEX events_time ON events (created_at);
        CREATE INDEX event_tags_time ON event_tags (name, value, created_at DESC, event_seq);
        CREATE INDEX event_tags_event ON event_tags (event_seq);
        CREATE TABLE publish_intents_rebuilt (
            intent_id TEXT PRIMARY KEY NOT NULL,
            operation_id TEXT NOT NULL REFERENCES publish_operations (operation_id),
            event_id TEXT NOT NULL,
            relay_url TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('pending', 'inFlight', 'accepted', 'rejected', 'retryable')),
            category TEXT,
            message TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            lease_id TEXT REFERENCES delivery_leases (lease_id),
            sequence INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            failures INTEGER NOT NULL DEFAULT 0,
            UNIQUE (event_id, relay_url)
        );
        INSERT INTO publish_intents_rebuilt
            (intent_id, operation_id, event_id, relay_url, state, category, message, attempts, lease_id, sequence, updated_at, failures)
            SELECT intent_id, operation_id, event_id, relay_url, state, category, message, attempts, lease_id, sequence, updated_at, failures
            FROM publish_intents;
        DROP TABLE publish_intents;
        ALTER TABLE publish_intents_rebuilt RENAME TO publish_intents;
        CREATE INDEX publish_intents_relay_state ON publish_intents (relay_url, state, sequence);
        CREATE INDEX publish_intents_lease ON publish_intents (lease_id);
        CREATE TABLE conversations (
            kind INTEGER NOT NULL,
            tag TEXT NOT NULL,
            value TEXT NOT NULL,
            messages INTEGER NOT NULL,
            latest_created_at INTEGER NOT NULL,
            PRIMARY KEY (kind, tag, value)
        ) WITHOUT ROWID;
        CREATE INDEX conversations_recent ON conversations (kind, tag, latest_created_at DESC);
        INSERT INTO conversations (kind, tag, value, messages, latest_created_at)
            SELECT e.kind, t.name, t.value, COUNT(*), MAX(e.created_at) FROM event_tags t JOIN events e ON e.seq = t.event_seq
            WHERE t.name IN \(ConversationIndex.tagsSQL) AND e.deleted = 0 AND \(ConversationIndex.kindsSQL("e.kind"))
            GROUP BY e.kind, t.name, t.value;
        CREATE TABLE negentropy_items (
            filter_json TEXT PRIMARY KEY NOT NULL,
            high_water INTEGER NOT NULL,
            items BLOB NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE read_markers (
            kind INTEGER NOT NULL,
            tag TEXT NOT NULL,
            value TEXT NOT NULL,
            read_until INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (kind, tag, value)
        ) WITHOUT ROWID;
        """,
        // 10: the events that expire (NIP-40), by when, so the conversation list's unread counts
        // leave out the expired ones with one seek over the few that have expired.
        """
        CREATE INDEX events_expiry ON events (expires_at) WHERE expires_at IS NOT NULL;
        """,
        // 11: the tag rows of the events an earlier build indexed wrongly, read again from their
        // tags by code (``code(after:)``): nothing in the tables' shape changes.
        """
        SELECT 1;
        """,
        // 12: NIP-17 private messages. `gift_wraps` has one row per stored gift wrap addressed to
        // an identity the account unwraps for, written in the transaction that stores the wrap:
        // the rumor it held, or why it failed — so no wrap is ever decrypted twice. Messages are
        // keyed by rumor id (a second wrap of the same rumor adds none); rooms keep each room's
        // newest time, message count and read mark, so the room list is one indexed read; a
        // wrapped kind-5 deletion of the sender's own messages is remembered for late arrivals.
        """
        CREATE TABLE gift_wraps (
            wrap_id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            rumor_id TEXT,
            failure TEXT,
            CHECK ((rumor_id IS NULL) != (failure IS NULL))
        ) WITHOUT ROWID;
        CREATE TABLE private_messages (
            seq INTEGER PRIMARY KEY,
            owner TEXT NOT NULL,
            rumor_id TEXT NOT NULL,
            wrap_id TEXT NOT NULL,
            room TEXT NOT NULL,
            sender TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            kind INTEGER NOT NULL,
            expires_at INTEGER,
            deleted INTEGER NOT NULL DEFAULT 0,
            received_at INTEGER NOT NULL,
            rumor TEXT NOT NULL,
            UNIQUE (owner, rumor_id)
        );
        CREATE INDEX private_messages_room ON private_messages (owner, room, created_at DESC, rumor_id DESC);
        CREATE INDEX private_messages_unread ON private_messages (owner, room, seq);
        CREATE TABLE private_rooms (
            owner TEXT NOT NULL,
            room TEXT NOT NULL,
            latest_at INTEGER NOT NULL,
            messages INTEGER NOT NULL,
            read_seq INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (owner, room)
        ) WITHOUT ROWID;
        CREATE TABLE private_deletions (
            owner TEXT NOT NULL,
            sender TEXT NOT NULL,
            target TEXT NOT NULL,
            PRIMARY KEY (owner, sender, target)
        ) WITHOUT ROWID;
        CREATE INDEX private_rooms_latest ON private_rooms (owner, latest_at DESC, room);
        """,
        // 13: an operation's intents by operation, in publish order: `intents(operationID:)` and
        // the delivery observations read them with one seek (they read every intent before).
        """
        CREATE INDEX publish_intents_operation ON publish_intents (operation_id, sequence, relay_url);
        """,
    ]

    /// The work a step does in code after its SQL, in the same transaction.
    static func code(after version: Int, _ db: SQLiteConnection) throws {
        switch version {
        case 11:
            // The tag rows earlier builds wrote short or long (``TagIndex/reindex(_:)``).
            try TagIndex.reindex(db)
        default:
            break
        }
    }

    /// Steps that rebuild tables: run with `PRAGMA foreign_keys = OFF` (a rebuild drops and
    /// renames tables other tables refer to), and `PRAGMA foreign_key_check` must find nothing
    /// before the step commits.
    static let foreignKeysOffSteps: Set<Int> = [9]

    static var latestVersion: Int { steps.count }

    /// The version that added private messages (step 12's tables).
    static let privateMessagesVersion = 12

    /// Refuses a file that is not a Softchat account before anything writes to it: only a file
    /// with Softchat's application_id, an empty file, or an account made before accounts carried
    /// the id (a schema version of ours and our tables) is opened, and the id is then set.
    /// Another program's file is left exactly as it was.
    static func checkIdentity(_ db: SQLiteConnection) throws {
        let current = Int(try db.scalarInt("PRAGMA user_version"))
        let applicationID = try db.scalarInt("PRAGMA application_id")
        func refuse(_ why: String) -> SoftchatError { Self.refusal(db, why) }
        if applicationID != Int64(AccountStore.applicationID) {
            guard applicationID == 0 else { throw refuse("application_id \(applicationID) is another program's: not a Softchat account") }
            let tables = try db.scalarInt("SELECT COUNT(*) FROM sqlite_schema")
            let ours = try db.scalarInt(
                "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('events', 'publish_intents', 'delivery_leases')")
            guard (current == 0 && tables == 0) || (current >= 1 && current <= latestVersion && ours == 3) else {
                throw refuse("not a Softchat account (an SQLite file with other tables, schema version \(current))")
            }
            try db.execute("PRAGMA application_id = \(AccountStore.applicationID)")
        }
    }

    /// A file this build will not open or migrate: `invalid_persistence_result`, permanent.
    static func refusal(_ db: SQLiteConnection, _ why: String) -> SoftchatError {
        .invalidPersistenceResult("migrate \(db.path): \(why)", operation: .relayIngestion)
    }

    static func migrate(_ db: SQLiteConnection, upTo target: Int = latestVersion) throws {
        let current = Int(try db.scalarInt("PRAGMA user_version"))
        guard current >= 0 else { throw refusal(db, "database version \(current) is not a Softchat schema version") }
        guard current <= latestVersion else {
            // Not an SQLite failure, and not retryable: only a newer build can open this file.
            throw refusal(db, "database version \(current) is newer than this build understands (\(latestVersion))")
        }
        guard current < target else { return }
        for version in (current + 1)...target {
            // The pragma is a no-op inside a transaction, so it is set around it.
            let rebuild = foreignKeysOffSteps.contains(version)
            if rebuild { try db.execute("PRAGMA foreign_keys = OFF") }
            defer { if rebuild { try? db.execute("PRAGMA foreign_keys = ON") } }
            try db.transaction("migrate to version \(version)") {
                try db.execute(steps[version - 1])
                try code(after: version, db)
                if rebuild {
                    let violations = try db.statement("PRAGMA foreign_key_check")
                    if try violations.step() {
                        throw refusal(db, "version \(version): a row of \(violations.text(0)) refers to a missing row after the rebuild")
                    }
                }
                try db.execute("PRAGMA user_version = \(version)")
            }
        }
    }
}
