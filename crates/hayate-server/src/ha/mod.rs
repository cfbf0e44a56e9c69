//! High availability through etcd (docs/design.md 8.7): which node is the primary, fencing by
//! a leader lease, and automatic failover to the synchronous standby. etcd is the only
//! consensus; this module holds none of its own.
//!
//! Keys under `/hayate/{cluster}/`:
//! - `leader`: the primary (`{"node", "replication", "client", "epoch"}`), attached to its
//!   node's lease, taken only by create-if-absent. It disappears when the lease runs out.
//! - `sync`: `{"epoch", "primary", "standby"}`, no lease: the nodes that hold every
//!   acknowledged commit. A new leader writes it with no standby; a standby is added (by
//!   compare-and-swap on the value the primary wrote) before its acknowledgements count
//!   (`replication::SyncGate`). Only a node it names may take the leader key; a cluster
//!   without it is new and any node may.
//! - `members/{node}`: each node's role and addresses, attached to its lease (`hayate status`).
//!
//! Every node holds one lease of `ttl`, renewed every `ttl / 4`. A primary's deadline is the
//! send time of its last successful renewal plus the TTL less an eighth: past it the node
//! acknowledges nothing (`Primary::set_lease_deadline`) and gives up the primary role; etcd
//! deletes the leader key only later, at the lease's own end, so two primaries never
//! acknowledge at once.

pub mod etcd;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::replication::{Identity, Primary, Standby, StandbyState, SyncGate};
use etcd::{Etcd, EtcdResult};

/// What a node is told to be.
#[derive(Debug, Clone)]
pub struct HaConfig {
    /// etcd endpoints, comma-separated URLs.
    pub etcd: String,
    /// The cluster's name: its keys' prefix.
    pub cluster: String,
    /// This node's name, unique in the cluster.
    pub node: String,
    /// The lease's time to live.
    pub ttl: Duration,
    /// Where this node listens for standbys (and where they reach it).
    pub replication: String,
    /// Where clients reach this node (host:port), for `hayate status`.
    pub client: String,
}

/// The value of the leader key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leader {
    pub node: String,
    pub replication: String,
    pub client: String,
    pub epoch: u64,
}

/// The value of the sync key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncSet {
    pub epoch: u64,
    pub primary: String,
    pub standby: Option<String>,
}

/// The value of a member key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub node: String,
    pub role: String,
    pub client: String,
    pub replication: String,
    /// Position just past the last log byte this node holds.
    #[serde(default)]
    pub log_end: u64,
    /// Standby: position just past the last record applied; primary: its log end.
    #[serde(default)]
    pub applied: u64,
    /// Primary: the synchronous standby's acknowledged position.
    #[serde(default)]
    pub acknowledged: Option<u64>,
    /// Primary: the synchronous standby's name.
    #[serde(default)]
    pub sync_standby: Option<String>,
}

/// Log positions a member publishes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Positions {
    log_end: u64,
    applied: u64,
    acknowledged: Option<u64>,
    sync_standby: Option<String>,
}

/// The role `Coordinator::choose_role` settled on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// This node took the leader key for this epoch.
    Primary { epoch: u64 },
    /// Follow the primary at this replication address.
    Standby { primary: String },
}

/// Why a watched role ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleEnd {
    /// The node stops (shutdown).
    Stopped,
    /// The primary's lease ran out or was lost: it must rejoin as a standby.
    LostLease,
    /// The standby was promoted: it is the primary of this identity's epoch now.
    Promoted(Identity),
    /// The standby's data must be seeded again (why).
    Reseed(String),
    /// The standby's log forked from its primary's at `fork` (it was an old primary with an
    /// unacknowledged tail): rewind it there, or seed it again if that cannot be done.
    Rewind { fork: u64, why: String },
}

struct LeaseState {
    id: i64,
    /// Past this instant the lease may have run out.
    deadline: Instant,
}

/// A node's link to etcd: its lease (renewed by a thread), the leader and sync keys.
pub struct Coordinator {
    etcd: Etcd,
    config: HaConfig,
    lease: Mutex<LeaseState>,
    /// The leader key's value while this node holds it.
    leading: Mutex<Option<Vec<u8>>>,
    /// The sync key's value as this primary last wrote it.
    sync_written: Mutex<Option<Vec<u8>>>,
    role: Mutex<&'static str>,
    positions: Mutex<Positions>,
    lease_lost: AtomicBool,
    /// Ends the lease renewal (`resign`).
    stop: AtomicBool,
    /// Ends the role watches (`request_stop`; `resume` clears it).
    watch_stop: AtomicBool,
    lease_generation: AtomicI64,
    renewer: Mutex<Option<JoinHandle<()>>>,
}

fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("serializable")
}

impl Coordinator {
    /// Takes a lease and starts renewing it.
    pub fn start(config: HaConfig) -> EtcdResult<Arc<Coordinator>> {
        let etcd = Etcd::new(&config.etcd);
        let ttl = config.ttl.as_secs().max(1);
        let sent = Instant::now();
        let (id, granted) = etcd.grant(ttl)?;
        let coordinator = Arc::new(Coordinator {
            etcd,
            lease: Mutex::new(LeaseState {
                id,
                deadline: sent + Self::safe_ttl(granted),
            }),
            config,
            leading: Mutex::new(None),
            sync_written: Mutex::new(None),
            role: Mutex::new("starting"),
            positions: Mutex::new(Positions::default()),
            lease_lost: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            watch_stop: AtomicBool::new(false),
            lease_generation: AtomicI64::new(0),
            renewer: Mutex::new(None),
        });
        coordinator.publish_member();
        let renewing = coordinator.clone();
        let thread = std::thread::Builder::new()
            .name("hayate-ha-lease".into())
            .spawn(move || renewing.renew_loop())
            .map_err(|error| etcd::EtcdError(format!("starting the lease thread: {error}")))?;
        *coordinator.renewer.lock() = Some(thread);
        log::info!(
            "ha: node {} of cluster {} holds lease {id:x} ({granted} s)",
            coordinator.config.node,
            coordinator.config.cluster
        );
        Ok(coordinator)
    }

    /// The part of a granted TTL a node counts on: an eighth is left for clock-rate
    /// differences and the time etcd took to answer.
    fn safe_ttl(granted: u64) -> Duration {
        Duration::from_secs(granted) * 7 / 8
    }

    fn key(&self, name: &str) -> String {
        format!("/hayate/{}/{name}", self.config.cluster)
    }

    fn lease_id(&self) -> i64 {
        self.lease.lock().id
    }

    /// The instant past which this node's lease may have run out.
    pub fn lease_deadline(&self) -> Instant {
        self.lease.lock().deadline
    }

    fn renew_loop(&self) {
        let period = self.config.ttl / 4;
        let mut renewed = Instant::now();
        while !self.stop.load(Ordering::Acquire) {
            std::thread::sleep(period);
            let id = self.lease_id();
            let sent = Instant::now();
            if sent - renewed > self.config.ttl / 2 {
                log::warn!(
                    "ha: {:?} since the lease was last renewed (renewals every {period:?})",
                    sent - renewed
                );
            }
            let answer = self.etcd.keep_alive(id);
            if matches!(answer, Ok(Some(_))) {
                renewed = sent;
            }
            match answer {
                Ok(Some(ttl)) => {
                    self.lease.lock().deadline = sent + Self::safe_ttl(ttl);
                    self.publish_member();
                }
                Ok(None) => {
                    log::warn!("ha: lease {id:x} ran out; taking a new one");
                    self.lease_lost.store(true, Ordering::Release);
                    let sent = Instant::now();
                    if let Ok((id, ttl)) = self.etcd.grant(self.config.ttl.as_secs().max(1)) {
                        *self.lease.lock() = LeaseState {
                            id,
                            deadline: sent + Self::safe_ttl(ttl),
                        };
                        self.lease_generation.fetch_add(1, Ordering::AcqRel);
                        self.publish_member();
                    }
                }
                Err(error) => log::warn!("ha: renewing the lease: {error}"),
            }
        }
    }

    fn publish_member(&self) {
        let positions = self.positions.lock().clone();
        let member = Member {
            node: self.config.node.clone(),
            role: self.role.lock().to_string(),
            client: self.config.client.clone(),
            replication: self.config.replication.clone(),
            log_end: positions.log_end,
            applied: positions.applied,
            acknowledged: positions.acknowledged,
            sync_standby: positions.sync_standby,
        };
        let key = self.key(&format!("members/{}", self.config.node));
        if let Err(error) = self.etcd.put(&key, &to_json(&member), self.lease_id()) {
            log::warn!("ha: publishing this member: {error}");
        }
    }

    fn set_role(&self, role: &'static str) {
        *self.role.lock() = role;
        self.publish_member();
    }

    fn read<T: for<'de> Deserialize<'de>>(
        &self,
        name: &str,
    ) -> EtcdResult<Option<(T, i64, Vec<u8>)>> {
        Ok(match self.etcd.get(&self.key(name))? {
            Some(kv) => serde_json::from_slice(&kv.value)
                .ok()
                .map(|value| (value, kv.lease, kv.value)),
            None => None,
        })
    }

    /// Whether this node may take the leader key now: the sync set names it, or there is
    /// none yet (a new cluster) and it is not waiting to be seeded.
    fn eligible(&self, has_data: bool) -> EtcdResult<bool> {
        Ok(match self.read::<SyncSet>("sync")? {
            None => true,
            Some((sync, _, _)) => {
                has_data
                    && (sync.primary == self.config.node
                        || sync.standby.as_deref() == Some(&self.config.node))
            }
        })
    }

    /// Tries to take the leader key; the new epoch if this node took it.
    fn try_lead(&self) -> EtcdResult<Option<u64>> {
        let previous = self.read::<SyncSet>("sync")?;
        let epoch = previous.as_ref().map_or(1, |(sync, _, _)| sync.epoch + 1);
        let leader = Leader {
            node: self.config.node.clone(),
            replication: self.config.replication.clone(),
            client: self.config.client.clone(),
            epoch,
        };
        let value = to_json(&leader);
        if !self
            .etcd
            .create(&self.key("leader"), &value, self.lease_id())?
        {
            return Ok(None);
        }
        let sync = to_json(&SyncSet {
            epoch,
            primary: self.config.node.clone(),
            standby: None,
        });
        let written = match &previous {
            Some((_, _, old)) => self.etcd.replace(&self.key("sync"), old, &sync, 0)?,
            None => self.etcd.create(&self.key("sync"), &sync, 0)?,
        };
        if !written {
            // Another node changed the set between: give the key back.
            let _ = self.etcd.delete_if(&self.key("leader"), &value);
            return Ok(None);
        }
        *self.leading.lock() = Some(value);
        *self.sync_written.lock() = Some(sync);
        self.lease_lost.store(false, Ordering::Release);
        log::warn!(
            "ha: node {} is the primary (epoch {epoch})",
            self.config.node
        );
        Ok(Some(epoch))
    }

    /// Waits until this node either took the leader key or knows the primary to follow.
    /// `has_data`: the data directory holds a database.
    pub fn choose_role(&self, has_data: bool) -> EtcdResult<Role> {
        let poll = self.poll();
        let mut waited_for = String::new();
        loop {
            if self.stop.load(Ordering::Acquire) {
                return Err(etcd::EtcdError("stopping".into()));
            }
            match self.read::<Leader>("leader") {
                Ok(Some((leader, _, _))) if leader.node != self.config.node => {
                    self.set_role("standby");
                    return Ok(Role::Standby {
                        primary: leader.replication,
                    });
                }
                Ok(Some((leader, lease, value))) if lease == self.lease_id() => {
                    // This process's own lease, alive in etcd: it gave up the role (its
                    // deadline passed while etcd was unreachable) but nobody could take it.
                    let sync = match self.etcd.get(&self.key("sync")) {
                        Ok(sync) => sync.map(|kv| kv.value),
                        Err(error) => {
                            log::warn!("ha: reading the sync set: {error}");
                            std::thread::sleep(poll);
                            continue;
                        }
                    };
                    *self.leading.lock() = Some(value);
                    *self.sync_written.lock() = sync;
                    self.lease_lost.store(false, Ordering::Release);
                    self.set_role("primary");
                    log::warn!(
                        "ha: this node still holds the leader key (epoch {})",
                        leader.epoch
                    );
                    return Ok(Role::Primary {
                        epoch: leader.epoch,
                    });
                }
                Ok(Some(_)) => {
                    if waited_for != "self" {
                        log::warn!(
                            "ha: the leader key still names this node (an earlier run): \
                             waiting for its lease to run out"
                        );
                        waited_for = "self".into();
                    }
                }
                Ok(None) => match self.eligible(has_data) {
                    Ok(true) => match self.try_lead() {
                        Ok(Some(epoch)) => {
                            self.set_role("primary");
                            return Ok(Role::Primary { epoch });
                        }
                        Ok(None) => {}
                        // Unreachable, or the lease ran out meanwhile (the renewal takes a
                        // new one): try again.
                        Err(error) => log::warn!("ha: taking the leader key: {error}"),
                    },
                    Ok(false) => {
                        if waited_for != "sync" {
                            log::warn!(
                                "ha: no primary, and this node is not in the synchronous set: \
                                 waiting for one that is"
                            );
                            waited_for = "sync".into();
                        }
                    }
                    Err(error) => log::warn!("ha: {error}"),
                },
                Err(error) => log::warn!("ha: reading the leader: {error}"),
            }
            std::thread::sleep(poll);
        }
    }

    fn poll(&self) -> Duration {
        (self.config.ttl / 8).max(Duration::from_millis(50))
    }

    /// How a primary records its synchronous standby: compare-and-swap of the sync key from
    /// the value this node wrote, so a deposed primary cannot.
    pub fn sync_gate(self: &Arc<Self>) -> SyncGate {
        let coordinator = self.clone();
        Arc::new(move |standby: Option<&str>| coordinator.record_sync(standby))
    }

    /// Records `standby` in the sync set, or (None) this primary alone.
    fn record_sync(&self, standby: Option<&str>) -> bool {
        let Some(old) = self.sync_written.lock().clone() else {
            return false;
        };
        let Ok(mut set) = serde_json::from_slice::<SyncSet>(&old) else {
            return false;
        };
        set.standby = standby.map(str::to_string);
        let new = to_json(&set);
        match self.etcd.replace(&self.key("sync"), &old, &new, 0) {
            Ok(true) => {
                *self.sync_written.lock() = Some(new);
                match standby {
                    Some(standby) => log::warn!(
                        "ha: {standby} is in the synchronous set (epoch {})",
                        set.epoch
                    ),
                    None => log::warn!(
                        "ha: the synchronous set is this primary alone (epoch {}): no standby \
                         may take over until one is recorded again",
                        set.epoch
                    ),
                }
                true
            }
            Ok(false) => {
                log::error!("ha: the sync set changed under this primary: it was deposed");
                false
            }
            Err(error) => {
                log::warn!("ha: recording the synchronous standby: {error}");
                false
            }
        }
    }

    /// Runs while this node is the primary: moves the primary's acknowledgement deadline with
    /// each renewal; returns when the lease ran out or the node stops.
    pub fn watch_primary(&self, primary: &Primary) -> RoleEnd {
        let generation = self.lease_generation.load(Ordering::Acquire);
        loop {
            if self.watch_stop.load(Ordering::Acquire) {
                return RoleEnd::Stopped;
            }
            let deadline = self.lease_deadline();
            primary.set_lease_deadline(deadline);
            *self.positions.lock() = Positions {
                log_end: primary.log_end_lsn(),
                applied: primary.log_end_lsn(),
                acknowledged: Some(primary.acknowledged_lsn()),
                sync_standby: primary.sync_standby(),
            };
            if Instant::now() >= deadline
                || self.lease_lost.load(Ordering::Acquire)
                || self.lease_generation.load(Ordering::Acquire) != generation
            {
                primary.set_lease_deadline(Instant::now());
                primary.release_waiters();
                *self.leading.lock() = None;
                log::error!(
                    "ha: the leader lease ran out: this node acknowledges nothing more and \
                     rejoins as a standby"
                );
                return RoleEnd::LostLease;
            }
            std::thread::sleep(self.poll().min(Duration::from_millis(100)));
        }
    }

    /// Runs while this node is a standby: follows the leader key's moves, takes the leader
    /// key when it is free and this node is in the synchronous set, and promotes.
    pub fn watch_standby(&self, standby: &Standby) -> RoleEnd {
        loop {
            if self.watch_stop.load(Ordering::Acquire) {
                return RoleEnd::Stopped;
            }
            match standby.state() {
                StandbyState::Promoted(identity) => {
                    self.set_role("primary");
                    return RoleEnd::Promoted(identity);
                }
                StandbyState::NeedsSeed(why) => return RoleEnd::Reseed(why),
                StandbyState::NeedsRewind { fork, why } => return RoleEnd::Rewind { fork, why },
                StandbyState::Stopped => return RoleEnd::Stopped,
                StandbyState::Following => {}
            }
            let (log_end, applied) = standby.positions();
            *self.positions.lock() = Positions {
                log_end,
                applied,
                ..Positions::default()
            };
            if self.leading.lock().is_none() {
                match self.read::<Leader>("leader") {
                    Ok(Some((leader, _, _))) => {
                        if leader.node != self.config.node
                            && leader.replication != standby.primary()
                        {
                            log::warn!("ha: following the new primary {}", leader.node);
                            standby.set_primary(&leader.replication);
                        }
                    }
                    Ok(None) => match self.eligible(true) {
                        Ok(true) => match self.try_lead() {
                            Ok(Some(epoch)) => standby.request_promotion(epoch),
                            Ok(None) => {}
                            Err(error) => log::warn!("ha: taking the leader key: {error}"),
                        },
                        Ok(false) => {}
                        Err(error) => log::warn!("ha: {error}"),
                    },
                    Err(error) => log::warn!("ha: reading the leader: {error}"),
                }
            }
            std::thread::sleep(self.poll());
        }
    }

    /// Ends the watches (the node stops serving its role).
    pub fn request_stop(&self) {
        self.watch_stop.store(true, Ordering::Release);
    }

    /// The node shuts down (a signal): `choose_role` gives up, the lease is no longer renewed.
    pub fn request_shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        self.watch_stop.store(true, Ordering::Release);
    }

    /// Whether `request_shutdown` or `resign` was called.
    pub fn shutting_down(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Lets the next role's watch run (after `request_stop`).
    pub fn resume(&self) {
        self.watch_stop.store(false, Ordering::Release);
    }

    /// On a clean stop: gives the leader key up at once (no waiting for the lease) and
    /// revokes the lease.
    pub fn resign(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.renewer.lock().take() {
            let _ = thread.join();
        }
        if let Some(value) = self.leading.lock().take() {
            let _ = self.etcd.delete_if(&self.key("leader"), &value);
        }
        let _ = self.etcd.revoke(self.lease_id());
    }

    /// The cluster as etcd sees it: leader, sync set and members (`hayate status`).
    pub fn status(etcd: &str, cluster: &str) -> EtcdResult<ClusterStatus> {
        let client = Etcd::new(etcd);
        let get = |name: &str| client.get(&format!("/hayate/{cluster}/{name}"));
        let leader = get("leader")?.and_then(|kv| serde_json::from_slice(&kv.value).ok());
        let sync = get("sync")?.and_then(|kv| serde_json::from_slice(&kv.value).ok());
        let members = client
            .get_prefix(&format!("/hayate/{cluster}/members/"))?
            .into_iter()
            .filter_map(|kv| serde_json::from_slice(&kv.value).ok())
            .collect();
        Ok(ClusterStatus {
            leader,
            sync,
            members,
        })
    }
}

/// What `Coordinator::status` read.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterStatus {
    pub leader: Option<Leader>,
    pub sync: Option<SyncSet>,
    pub members: Vec<Member>,
}
