/// A bounded set of recently seen ids, forgetting the oldest first: an id is known until
/// `capacity` later insertions push it out, or until it is removed. The one such window of the
/// package: the session's recently confirmed events, the engine's ids on their way to a commit,
/// a relay's oversized ids.
package struct RecentIDs {
    package let capacity: Int
    private var set: Set<String> = []
    /// The last `capacity` insertions, oldest at `head` once full.
    private var order: [String] = []
    /// How many slots of `order` hold each id: an id removed and inserted again holds two, and
    /// only the eviction of its last slot may forget it.
    private var slots: [String: Int] = [:]
    private var head = 0

    package init(capacity: Int) { self.capacity = capacity }

    package func contains(_ id: String) -> Bool { set.contains(id) }

    /// Forgets `id` now (its slot in the window is reused in turn).
    package mutating func remove(_ id: String) { set.remove(id) }

    package mutating func insert(_ id: String) {
        guard set.insert(id).inserted else { return }
        slots[id, default: 0] += 1
        if order.count < capacity {
            order.append(id)
        } else {
            let evicted = order[head]
            let left = (slots[evicted] ?? 1) - 1
            slots[evicted] = left == 0 ? nil : left
            if left == 0 { set.remove(evicted) }
            order[head] = id
            head = (head + 1) % capacity
        }
    }

    /// Forgets every id.
    package mutating func removeAll() {
        set.removeAll()
        order.removeAll()
        slots.removeAll()
        head = 0
    }
}
