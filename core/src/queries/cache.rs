//! The last live answers a relay passed up, so that a cluster it cannot
//! reach is answered with what it last showed, marked with its age.
//!
//! Only [`Observation`]s are kept (`Object` and `Events` answers read live
//! from a cluster), keyed by the node and the exact query. The cache is
//! bounded twice: [`MAX_CACHED_ANSWERS`] entries and [`MAX_CACHED_BYTES`]
//! of JSON; the oldest entry goes first. It is memory only: a restarted
//! relay has nothing stale to show until answers pass through it again.

use std::collections::BTreeMap;
use std::time::Instant;

use relaymesh_protocol::query::{Answer, Observation, Query, MAX_ANSWER_JSON_LEN};

/// How many answers one relay keeps.
pub const MAX_CACHED_ANSWERS: usize = 1024;

/// How many bytes of JSON one relay keeps, at most.
pub const MAX_CACHED_BYTES: usize = 32 * 1024 * 1024;

/// A kept answer: which kind it was, what it said, and when it passed.
#[derive(Debug)]
struct Cached {
    events: bool,
    observation: Observation,
    stored: Instant,
}

/// The cache.
#[derive(Debug, Default)]
pub(crate) struct AnswerCache {
    entries: BTreeMap<(String, Query), Cached>,
    bytes: usize,
}

impl AnswerCache {
    /// Keeps `answer` to `query` about `node`, if it is a live observation
    /// within the size limit; replaces an older one.
    pub fn keep(&mut self, now: Instant, node: &str, query: &Query, answer: &Answer) {
        let (events, observation) = match answer {
            Answer::Object(observation) => (false, observation),
            Answer::Events(observation) => (true, observation),
            Answer::Link { .. } | Answer::Failed(_) => return,
        };
        if observation.age_ms.is_some() || observation.json.len() > MAX_ANSWER_JSON_LEN {
            return;
        }
        let key = (node.to_string(), query.clone());
        self.remove(&key);
        while self.entries.len() >= MAX_CACHED_ANSWERS
            || self.bytes + observation.json.len() > MAX_CACHED_BYTES
        {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, cached)| cached.stored)
                .map(|(key, _)| key.clone())
            else {
                break;
            };
            self.remove(&oldest);
        }
        self.bytes += observation.json.len();
        self.entries.insert(
            key,
            Cached {
                events,
                observation: observation.clone(),
                stored: now,
            },
        );
    }

    /// The kept answer to `query` about `node`, marked stale with its age
    /// at `now`.
    pub fn stale(&self, now: Instant, node: &str, query: &Query) -> Option<Answer> {
        let cached = self.entries.get(&(node.to_string(), query.clone()))?;
        let age = now.saturating_duration_since(cached.stored);
        let observation = Observation {
            age_ms: Some(u64::try_from(age.as_millis()).unwrap_or(u64::MAX)),
            ..cached.observation.clone()
        };
        Some(match cached.events {
            true => Answer::Events(observation),
            false => Answer::Object(observation),
        })
    }

    /// How many answers are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    fn remove(&mut self, key: &(String, Query)) {
        if let Some(old) = self.entries.remove(key) {
            self.bytes -= old.observation.json.len();
        }
    }
}
