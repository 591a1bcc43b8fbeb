//! The links to the children: revocations closing them, refusals,
//! bundle fetches for them, and the statistics sampled each second.

use relaymesh_core::{LinkId, LinkStats, Now};
use relaymesh_protocol::message::DownMessage;
use relaymesh_protocol::{BundleId, Refusal};

use super::{bundles, now, Daemon, Event};
use crate::pki;

impl Daemon {
    /// Adds a revocation to the deny list and closes every child link whose
    /// certificates it covers (the core closed a revoked child's own link
    /// already; this also catches a link opened with a certificate of a
    /// revoked issuer).
    pub(super) fn revoked(&mut self, revocation: &relaymesh_protocol::Revocation) {
        tracing::warn!(?revocation, "the root revoked");
        let Ok(mut deny) = self.shared.deny.write() else {
            return;
        };
        deny.insert(revocation);
        let refused: Vec<(LinkId, String)> = self
            .children
            .iter()
            .filter_map(|(link, child)| {
                let chain = pki::connection_chain(&child.connection).ok()?;
                Some((*link, deny.refuses_chain(&chain)?))
            })
            .collect();
        drop(deny);
        for (link, reason) in refused {
            let refusal = Refusal::new(relaymesh_protocol::ErrorCode::Revoked, reason);
            if self.close_child(link, &refusal) {
                self.core.handle_child_disconnected(now(), link);
            }
        }
    }

    /// Tells a child why, then closes its connection; false if it is gone.
    pub(super) fn close_child(&mut self, link: LinkId, refusal: &Refusal) -> bool {
        let Some(child) = self.children.remove(&link) else {
            return false;
        };
        let _ = child
            .outgoing
            .try_send(Box::new(DownMessage::Refused(refusal.clone())));
        child
            .connection
            .close(1u32.into(), refusal.message.as_bytes());
        true
    }

    pub(super) fn fetch_bundle(&mut self, id: BundleId) {
        let Some(connection) = self.parent.as_ref().map(|parent| parent.connection.clone()) else {
            self.core.handle_bundle_failed(now(), id);
            return;
        };
        let events = self.shared.events.clone();
        let store = self.store.clone();
        tokio::spawn(async move {
            let result = bundles::fetch_into_store(&connection, &store, id).await;
            let _ = events.send(Event::BundleFetched { id, result }).await;
        });
    }

    pub(super) fn sample_links(&mut self) {
        let now = now();
        self.count_refusals(now);
        for (link, child) in &self.children {
            // One lock of the connection's state per child: the statistics
            // carry the round-trip time too.
            let stats = child.connection.stats();
            self.core.handle_link_stats(
                now,
                *link,
                LinkStats {
                    rtt: stats.path.rtt,
                    bytes_sent: stats.udp_tx.bytes,
                    bytes_received: stats.udp_rx.bytes,
                },
            );
        }
    }
}

impl Daemon {
    /// Hands the refusals the links and the API counted to the core, which
    /// puts them in this node's own record; logged here, once a second at
    /// most, rather than once per refused request.
    fn count_refusals(&mut self, now: Now) {
        for (limit, count) in self.shared.refusals.take() {
            tracing::warn!(%limit, count, "refused requests over a limit");
            self.core.count_limit_refusals(now, limit, count);
        }
    }
}
