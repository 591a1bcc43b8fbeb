//! The root relay's HTTPS API: the Kubernetes API server of the
//! `relaymesh-apiserver` crate, with relaymesh's own kinds and paths mounted
//! on it ([`Relaymesh`], its [`Extension`](relaymesh_apiserver::Extension)):
//!
//! * Placements (stored, checked by the placement module before they are);
//! * read-only views of the tree made from the inventory: `Cluster`,
//!   `Relay` and `Agent` objects and SIG-Multicluster `ClusterProfile`s
//!   (the `inventory` and `nodes` modules);
//! * join tokens, revocations and user certificates (`tokens`,
//!   `revocations`, `users`), written with relaymesh's own verbs that only
//!   admins hold by default (`policy`, which authorizes every request with
//!   the RBAC objects the root stores);
//! * a raw bundle push for smoke tests and the placement explainer;
//! * what the tree knows only below, asked on demand: a node's link
//!   (`agents/NAME/link`) and one cluster's live object and events
//!   (`clusters/NAME/object`, `clusters/NAME/events`; `observed`).
//!
//! The API does not own state: everything relaymesh-specific it serves
//! comes from a [`Backend`] the daemon implements.
//!
//! How the parts fit: [`serve`] (`serving`) hands a [`Relaymesh`]
//! (`extension`) to the API server, which asks it for its kinds
//! (`resources`, with the Placement checks of `admission`), for the route
//! of each request (`routing`), and then for the answer (`handlers`, and
//! `explain`), which comes from the [`Backend`] (`backend`). The types the
//! API and the backend hand each other are in `types`, the group names in
//! `groups`: leaves that import no other part, so every part may use
//! them without closing a circle.

mod admission;
mod backend;
mod cluster_labels;
pub mod cordons;
mod explain;
mod extension;
#[doc(hidden)]
pub mod fuzzing;
mod groups;
mod handlers;
mod inventory;
mod limits;
mod moves;
mod nodes;
mod observed;
mod policy;
mod resources;
mod revocations;
mod rotations;
mod routing;
mod schemas;
mod serving;
mod tokens;
mod types;
mod users;

pub use backend::Backend;
pub use cluster_labels::{merge as merge_cluster_labels, LabelChange, MAX_ANNOTATION_BYTES};
pub use extension::Relaymesh;
pub use limits::watch_limits;
pub use moves::{check_move, MoveRequest, DEFAULT_MOVE_TTL};
pub use policy::{check_group, ADMINS, GROUPS, ISSUE, MOVE, OPERATORS, REVOKE, VIEWERS};
pub use relaymesh_apiserver::{ApiError, AuditLog, PeerIdentity, User};
pub use relaymesh_node::daemon::root_services::Inventory;
pub use serving::{serve, ApiTls};
pub use types::{ApiCaState, IssuedToken, NodeLink, NodeRevoked, TokenRequest};
pub use users::ApiAuthorities;
pub use users::DEFAULT_VALIDITY as DEFAULT_USER_CERT_VALIDITY;

// The kind modules older than this split name these as `super::VERSION`
// and `super::MULTICLUSTER_GROUP`.
use groups::{MULTICLUSTER_GROUP, VERSION};
