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
            Answer::Link { .. }
            | Answer::Failed(_)
            | Answer::Placement { .. }
            | Answer::Split { .. } => return,
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn events(limit: u32) -> Query {
        Query::Events {
            namespace: None,
            limit,
        }
    }

    fn live(len: usize) -> Answer {
        Answer::Events(Observation {
            cluster: "edge-1".into(),
            json: vec![b' '; len],
            age_ms: None,
        })
    }

    #[test]
    fn the_oldest_answer_goes_first_past_either_bound() {
        let start = Instant::now();
        let mut cache = AnswerCache::default();
        let count = u32::try_from(MAX_CACHED_ANSWERS).expect("small");
        for limit in 0..=count {
            let at = start + Duration::from_millis(u64::from(limit));
            cache.keep(at, "edge-1", &events(limit), &live(1));
        }
        assert_eq!(cache.len(), MAX_CACHED_ANSWERS);
        let later = start + Duration::from_secs(60);
        assert!(cache.stale(later, "edge-1", &events(0)).is_none());
        let Some(Answer::Events(kept)) = cache.stale(later, "edge-1", &events(1)) else {
            panic!("the second answer is kept");
        };
        assert_eq!(kept.age_ms, Some(59_999));

        // Bytes: answers of the largest size fill the budget, no more.
        let per = MAX_CACHED_BYTES / MAX_ANSWER_JSON_LEN;
        for limit in 0..=u32::try_from(per).expect("small") {
            cache.keep(later, "edge-2", &events(limit), &live(MAX_ANSWER_JSON_LEN));
        }
        assert!(cache.bytes <= MAX_CACHED_BYTES, "{}", cache.bytes);
        assert!(cache.stale(later, "edge-2", &events(0)).is_none());
    }

    #[test]
    fn only_live_observations_within_the_limit_are_kept() {
        let now = Instant::now();
        let mut cache = AnswerCache::default();
        let stale = Answer::Events(Observation {
            cluster: "edge-1".into(),
            json: b"[]".to_vec(),
            age_ms: Some(5),
        });
        cache.keep(now, "edge-1", &events(1), &stale);
        cache.keep(now, "edge-1", &events(2), &live(MAX_ANSWER_JSON_LEN + 1));
        let failed = Answer::Failed(relaymesh_protocol::Refusal::new(
            relaymesh_protocol::ErrorCode::Internal,
            "no",
        ));
        cache.keep(now, "edge-1", &events(3), &failed);
        assert_eq!(cache.len(), 0);
    }
}
