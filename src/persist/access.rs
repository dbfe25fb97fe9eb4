//! Keys' access data across restarts: what Redis's RDB keeps as `IDLE` (LRU policies) and
//! `FREQ` (LFU policies) for each key, here a side table written whole at a clean shutdown,
//! SAVE or DEBUG RELOAD and read after the keys are loaded. Between saves it is not kept
//! current (a read is not a write), so after a crash keys get the last save's data, as a
//! Redis restart gets its last RDB's.

use super::layout::ACCESS;
use super::store::Store;
use super::PersistError;
use redb::{ReadableDatabase, ReadableTable, TableError};

type Result<T> = std::result::Result<T, PersistError>;

/// One key's access data, relative to the moment it was saved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Seconds since the last access (LRU policies).
    Idle(u32),
    /// The LFU counter, decayed to the save time (LFU policies).
    Freq(u8),
}

impl Access {
    fn pack(self) -> u64 {
        match self {
            Access::Idle(s) => (1 << 32) | u64::from(s),
            Access::Freq(c) => (2 << 32) | u64::from(c),
        }
    }

    fn unpack(v: u64) -> Option<Access> {
        let low = (v & 0xFFFF_FFFF) as u32;
        match v >> 32 {
            1 => Some(Access::Idle(low)),
            2 => u8::try_from(low).ok().map(Access::Freq),
            _ => None,
        }
    }
}

impl Store {
    /// Replaces the saved access data with `rows` (db, key, access), in one transaction.
    pub fn save_access<'a>(
        &self,
        rows: impl IntoIterator<Item = (usize, &'a [u8], Access)>,
    ) -> Result<usize> {
        let w = self.database().begin_write()?;
        let mut n = 0;
        {
            match w.delete_table(ACCESS) {
                Ok(_) | Err(TableError::TableDoesNotExist(_)) => {}
                Err(e) => return Err(e.into()),
            }
            let mut t = w.open_table(ACCESS)?;
            for (db, key, a) in rows {
                let db = u32::try_from(db).unwrap_or(u32::MAX);
                t.insert((db, key), a.pack())?;
                n += 1;
            }
        }
        w.commit()?;
        Ok(n)
    }

    /// Hands every saved (db, key, access) to `sink`; nothing when none was saved.
    pub fn load_access(&self, mut sink: impl FnMut(usize, &[u8], Access)) -> Result<usize> {
        let r = self.database().begin_read()?;
        let t = match r.open_table(ACCESS) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(0),
            Err(e) => return Err(e.into()),
        };
        let mut n = 0;
        for row in t.iter()? {
            let (k, v) = row?;
            let (db, key) = k.value();
            if let Some(a) = Access::unpack(v.value()) {
                sink(db as usize, key, a);
                n += 1;
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_access_loads_back_and_a_save_replaces_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        assert_eq!(s.load_access(|_, _, _| panic!("nothing saved")).unwrap(), 0);
        let rows = [
            (0, &b"a"[..], Access::Idle(42)),
            (3, &b"b"[..], Access::Freq(200)),
        ];
        assert_eq!(s.save_access(rows).unwrap(), 2);
        let mut got = Vec::new();
        s.load_access(|db, k, a| got.push((db, k.to_vec(), a)))
            .unwrap();
        assert_eq!(
            got,
            vec![
                (0, b"a".to_vec(), Access::Idle(42)),
                (3, b"b".to_vec(), Access::Freq(200))
            ]
        );
        s.save_access([(1, &b"c"[..], Access::Freq(5))]).unwrap();
        got.clear();
        s.load_access(|db, k, a| got.push((db, k.to_vec(), a)))
            .unwrap();
        assert_eq!(got, vec![(1, b"c".to_vec(), Access::Freq(5))]);
    }
}
