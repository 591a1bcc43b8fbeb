//! The link to the parent: a new connection, its control stream, and what
//! the uplink is told of the parent's verdict.

use relaymesh_protocol::message::{DownMessage, Hello, UpMessage};
use relaymesh_protocol::Refusal;
use tokio::sync::mpsc;

use super::{Daemon, Event, ParentHandle, CHILD_QUEUE};
use crate::transport::uplink;
use crate::transport::LinkError;

impl Daemon {
    pub(super) fn is_current(&self, generation: u64) -> bool {
        self.parent
            .as_ref()
            .is_some_and(|parent| parent.generation == generation)
    }

    /// Opens the control stream on a new parent connection. The hello is
    /// taken now, from the core's durable position.
    pub(super) fn parent_connected(&mut self, connection: quinn::Connection) {
        self.generation += 1;
        let generation = self.generation;
        let hello = self.core.hello();
        let (outgoing_tx, outgoing_rx) = mpsc::channel(CHILD_QUEUE);
        self.parent = Some(ParentHandle {
            generation,
            connection: connection.clone(),
            outgoing: Some(outgoing_tx),
        });
        let events = self.shared.events.clone();
        tokio::spawn(async move {
            let (reason, refusal) =
                match parent_session(&connection, hello, generation, &events, outgoing_rx).await {
                    Ok(()) => ("stream closed".to_string(), None),
                    Err(LinkError::Refused(refusal)) => (refusal.to_string(), Some(refusal)),
                    Err(error) => (error.to_string(), None),
                };
            let _ = events
                .send(Event::ParentStreamEnded {
                    generation,
                    reason,
                    refusal,
                })
                .await;
        });
    }

    /// Tells the uplink that the parent welcomed (`None`) or refused this
    /// node on the current connection, which sets when it dials next.
    pub(super) fn tell_uplink(&self, refusal: Option<Refusal>) {
        let Some(parent) = &self.parent else { return };
        let verdict = uplink::Verdict {
            connection: parent.connection.stable_id(),
            refusal,
        };
        // Never blocks the loop; the uplink takes them as they come.
        let _ = self.verdicts.try_send(verdict);
    }
}

/// Runs the control stream to the parent until it ends.
pub(super) async fn parent_session(
    connection: &quinn::Connection,
    hello: Hello,
    generation: u64,
    events: &mpsc::Sender<Event>,
    outgoing: mpsc::Receiver<UpMessage>,
) -> Result<(), LinkError> {
    let control = uplink::open_control(connection, hello).await?;
    let mut recv = control.recv;
    events
        .send(Event::ParentMessage {
            generation,
            message: control.first,
        })
        .await
        .map_err(|_| LinkError::Protocol("relay is stopping".into()))?;
    let writer = tokio::spawn(uplink::pump_up(control.send, outgoing));
    let result = async {
        while let Some(message) = crate::transport::read_frame::<DownMessage>(&mut recv).await? {
            if events
                .send(Event::ParentMessage {
                    generation,
                    message,
                })
                .await
                .is_err()
            {
                break;
            }
        }
        Ok(())
    }
    .await;
    writer.abort();
    result
}
