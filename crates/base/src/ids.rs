//! A set of ids (case ids, mostly) numbered in the order they are first seen, held in one
//! string and two small vectors: for a run of 100,000 cases about 16 bytes an id, where a
//! map of `String`s takes about 70 (each id its own allocation, each entry its own slot).
//! The pages `view` makes and the comparisons `compare` makes hold several runs' ids at
//! once (docs/dev/performance.md, figure p).

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

/// Ids, each with a number: 0, 1, 2… in the order they were first interned.
#[derive(Debug, Clone, Default)]
pub struct Ids {
    /// Every id, one after another.
    text: String,
    /// Where id i ends in `text` (it starts where id i − 1 ends).
    ends: Vec<u32>,
    /// The numbers, found by their id's hash.
    table: HashTable<u32>,
    hasher: RandomState,
}

/// Id `i` of `text`, where id i ends at `ends[i]` and starts where id i − 1 ends.
fn nth<'a>(text: &'a str, ends: &[u32], i: u32) -> &'a str {
    let i = i as usize;
    let start = if i == 0 { 0 } else { ends[i - 1] as usize };
    &text[start..ends[i] as usize]
}

impl Ids {
    /// No id yet.
    pub fn new() -> Ids {
        Ids::default()
    }

    /// Room for `n` ids before the table grows.
    pub fn with_capacity(n: usize) -> Ids {
        Ids {
            ends: Vec::with_capacity(n),
            table: HashTable::with_capacity(n),
            ..Ids::default()
        }
    }

    /// Id number `i`.
    ///
    /// # Panics
    /// When there is no id `i`.
    pub fn id(&self, i: u32) -> &str {
        nth(&self.text, &self.ends, i)
    }

    /// `id`'s number, if it has one.
    pub fn get(&self, id: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(id);
        self.table.find(hash, |&i| self.id(i) == id).copied()
    }

    /// `id`'s number, given it (the next number) the first time it is seen.
    pub fn intern(&mut self, id: &str) -> u32 {
        let hash = self.hasher.hash_one(id);
        let Ids {
            text,
            ends,
            table,
            hasher,
        } = self;
        if let Some(&i) = table.find(hash, |&i| nth(text, ends, i) == id) {
            return i;
        }
        let i = ends.len() as u32;
        text.push_str(id);
        ends.push(text.len() as u32);
        table.insert_unique(hash, i, |&j| hasher.hash_one(nth(text, ends, j)));
        i
    }

    /// How many ids there are.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The numbers in the order of their ids (byte order, as `str` sorts).
    pub fn sorted(&self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| self.id(a).cmp(self.id(b)));
        order
    }

    /// Gives back the room kept for more ids.
    pub fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
        let Ids {
            text,
            ends,
            table,
            hasher,
        } = self;
        table.shrink_to_fit(|&j| hasher.hash_one(nth(text, ends, j)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_numbered_in_first_seen_order_and_found_again() {
        let mut ids = Ids::new();
        let words = ["c10", "c2", "", "c1", "c2", "ü-ß", "c10"];
        let numbers: Vec<u32> = words.iter().map(|w| ids.intern(w)).collect();
        assert_eq!(numbers, vec![0, 1, 2, 3, 1, 4, 0]);
        assert_eq!(ids.len(), 5);
        assert_eq!(ids.id(4), "ü-ß");
        assert_eq!(ids.id(2), "");
        assert_eq!(ids.get("c1"), Some(3));
        assert_eq!(ids.get("c3"), None);
        let sorted: Vec<&str> = ids.sorted().into_iter().map(|i| ids.id(i)).collect();
        assert_eq!(sorted, vec!["", "c1", "c10", "c2", "ü-ß"]);
    }

    /// Past the table's first growth and after giving room back, every id keeps its
    /// number.
    #[test]
    fn many_ids_keep_their_numbers_through_growth() {
        let mut ids = Ids::with_capacity(4);
        for i in 0..10_000u32 {
            assert_eq!(ids.intern(&format!("case-{i}")), i);
        }
        ids.shrink_to_fit();
        for i in (0..10_000u32).step_by(997) {
            assert_eq!(ids.get(&format!("case-{i}")), Some(i));
            assert_eq!(ids.id(i), format!("case-{i}"));
        }
        assert_eq!(ids.intern("case-5"), 5);
        assert_eq!(ids.len(), 10_000);
    }
}
