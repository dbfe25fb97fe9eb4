//! Consumer groups: last-delivered ID, read counter, the group PEL (pending entries: ID →
//! owner, delivery time, delivery count) and consumers with their own PEL index.

use super::StreamId;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

/// `entries_read` value meaning "unknown" (Redis `SCG_INVALID_ENTRIES_READ`).
pub const INVALID_ENTRIES_READ: i64 = -1;

/// A pending (delivered, not acknowledged) entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Nack {
    pub consumer: Bytes,
    /// Unix ms of the last delivery.
    pub delivery_time: i64,
    pub delivery_count: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Consumer {
    /// Last time the consumer tried an operation (ms).
    pub seen_time: i64,
    /// Last successful interaction (ms); -1 if never.
    pub active_time: i64,
    /// IDs of the group PEL entries this consumer owns.
    pub pel: BTreeSet<StreamId>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub last_id: StreamId,
    /// Logical read counter of `last_id`, or [`INVALID_ENTRIES_READ`].
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Bytes, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            pel: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }

    pub fn approx_size(&self) -> usize {
        let names: usize = self.consumers.keys().map(|k| k.len() + 64).sum();
        64 + self.pel.len() * 96 + names
    }

    /// Creates a consumer seen at `now`; false if it exists.
    pub fn create_consumer(&mut self, name: &[u8], now: i64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.consumers.insert(
            Bytes::copy_from_slice(name),
            Consumer {
                seen_time: now,
                active_time: -1,
                pel: BTreeSet::new(),
            },
        );
        true
    }

    /// The consumer, created if missing (XREADGROUP/XCLAIM/XAUTOCLAIM), marked seen now.
    /// Returns whether it was created.
    pub fn touch_consumer(&mut self, name: &[u8], now: i64) -> bool {
        let created = self.create_consumer(name, now);
        if let Some(c) = self.consumers.get_mut(name) {
            c.seen_time = now;
        }
        created
    }

    /// Deletes a consumer and its pending entries; returns how many it had.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }

    /// Records a delivery of `id` to `consumer` (new entry, or an entry owned by someone
    /// else after `XGROUP SETID` rewound the group): delivery count 1, time `now`.
    pub fn deliver(&mut self, id: StreamId, consumer: &Bytes, now: i64) {
        let fresh = Nack {
            consumer: consumer.clone(),
            delivery_time: now,
            delivery_count: 1,
        };
        if let Some(old) = self.pel.insert(id, fresh) {
            if let Some(c) = self.consumers.get_mut(&old.consumer) {
                c.pel.remove(&id);
            }
        }
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
            c.active_time = now;
        }
    }

    /// Acknowledges `id`; false if it was not pending.
    pub fn ack(&mut self, id: &StreamId) -> bool {
        let Some(n) = self.pel.remove(id) else {
            return false;
        };
        if let Some(c) = self.consumers.get_mut(&n.consumer) {
            c.pel.remove(id);
        }
        true
    }

    /// Moves a pending entry to `consumer` (XCLAIM/XAUTOCLAIM), creating it when `force`
    /// and it is missing. Returns false if it is not pending.
    pub fn claim(
        &mut self,
        id: StreamId,
        consumer: &Bytes,
        delivery_time: i64,
        count: ClaimCount,
    ) -> bool {
        let Some(n) = self.pel.get_mut(&id) else {
            return false;
        };
        let old = std::mem::replace(&mut n.consumer, consumer.clone());
        n.delivery_time = delivery_time;
        match count {
            ClaimCount::Set(c) => n.delivery_count = c,
            ClaimCount::Increment => n.delivery_count = n.delivery_count.wrapping_add(1),
            ClaimCount::Keep => {}
        }
        if old != *consumer {
            if let Some(c) = self.consumers.get_mut(&old) {
                c.pel.remove(&id);
            }
        }
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
        true
    }

    /// Adds an ownerless pending entry (XCLAIM FORCE) to be claimed right after.
    pub fn force_pending(&mut self, id: StreamId, now: i64) {
        self.pel.entry(id).or_insert(Nack {
            consumer: Bytes::new(),
            delivery_time: now,
            delivery_count: 1,
        });
    }
}

/// What claiming does to the delivery counter.
#[derive(Clone, Copy, Debug)]
pub enum ClaimCount {
    Set(u64),
    Increment,
    Keep,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn pel_moves_between_consumers() {
        let mut g = Group::new(StreamId::MIN, 0);
        assert!(g.create_consumer(b"a", 1));
        assert!(!g.create_consumer(b"a", 2));
        g.touch_consumer(b"b", 3);
        let id = StreamId::new(1, 0);
        g.deliver(id, &b("a"), 10);
        assert_eq!(g.consumers[&b("a")].active_time, 10);
        assert!(g.claim(id, &b("b"), 20, ClaimCount::Increment));
        assert!(g.consumers[&b("a")].pel.is_empty());
        assert!(g.consumers[&b("b")].pel.contains(&id));
        assert_eq!(g.pel[&id].delivery_count, 2);
        // Redelivery to a after SETID: b loses it, count restarts.
        g.deliver(id, &b("a"), 30);
        assert!(g.consumers[&b("b")].pel.is_empty());
        assert_eq!(g.pel[&id].delivery_count, 1);
        assert!(g.ack(&id));
        assert!(!g.ack(&id));
        assert!(g.consumers[&b("a")].pel.is_empty());
        g.deliver(StreamId::new(2, 0), &b("b"), 40);
        assert_eq!(g.delete_consumer(b"b"), Some(1));
        assert!(g.pel.is_empty());
        assert_eq!(g.delete_consumer(b"zz"), None);
    }
}
