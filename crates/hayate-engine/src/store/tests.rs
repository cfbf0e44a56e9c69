use std::sync::Arc;

use super::*;
use crate::io::sync_file::SyncIo;
use crate::io::AlignedBuf;
use crate::page::{self, PageHeaderBuilder, PageKind, PAGE_HEADER_SIZE};

fn image(page_id: PageId, value: u64, page_size: usize) -> AlignedBuf {
    let mut bytes = AlignedBuf::new(page_size);
    PageHeaderBuilder::new(&mut bytes).init(PageKind::BtreeLeaf, page_id);
    bytes[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + 8].copy_from_slice(&value.to_le_bytes());
    page::seal(&mut bytes);
    bytes
}

fn value_of(store: &dyn PageStore, page_id: PageId) -> u64 {
    let mut buf = AlignedBuf::new(store.page_size());
    store.read_page(page_id, &mut buf).expect("read");
    u64::from_le_bytes(
        buf[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + 8]
            .try_into()
            .unwrap(),
    )
}

fn checkpoint(store: &dyn PageStore, id: u64, pages: &[(PageId, AlignedBuf)]) {
    let snapshot = store.begin_checkpoint();
    let refs: Vec<(PageId, &[u8])> = pages.iter().map(|(id, b)| (*id, &b[..])).collect();
    let meta = CheckpointMeta {
        checkpoint_id: id,
        redo_lsn: id * 100,
        payload: vec![id as u8],
    };
    store
        .finish_checkpoint(snapshot, &refs, &meta)
        .expect("checkpoint");
}

fn config(policy: WritePolicy, page_size: usize) -> StoreConfig {
    StoreConfig {
        policy,
        page_size,
        segment_pages: 16,
        ..StoreConfig::default()
    }
}

fn reopen_returns_checkpoint_state(policy: WritePolicy, page_size: usize) {
    let dir = tempfile::tempdir().unwrap();
    let io: Arc<dyn crate::io::Io> = Arc::new(SyncIo::new(dir.path()).unwrap());
    let (store, created) = open(io.clone(), &config(policy, page_size)).unwrap();
    assert!(created);
    let ids: Vec<PageId> = (0..40).map(|_| store.allocate_page_id().unwrap()).collect();
    let first: Vec<(PageId, AlignedBuf)> = ids
        .iter()
        .map(|&id| (id, image(id, id, page_size)))
        .collect();
    checkpoint(store.as_ref(), 2, &first);
    // Overwrite after the checkpoint without checkpointing again: a crash must forget these.
    for &id in &ids[..20] {
        store
            .write_pages(&[(id, &image(id, id + 1000, page_size))])
            .unwrap();
        assert_eq!(value_of(store.as_ref(), id), id + 1000);
    }
    store.check().unwrap();
    drop(store);
    let (store, created) = open(io.clone(), &config(policy, page_size)).unwrap();
    assert!(!created);
    assert_eq!(store.opened_checkpoint().unwrap().checkpoint_id, 2);
    assert_eq!(store.opened_checkpoint().unwrap().payload, vec![2]);
    for &id in &ids {
        assert_eq!(
            value_of(store.as_ref(), id),
            id,
            "page {id} after reopen ({policy:?})"
        );
    }
    store.check().unwrap();
    assert_eq!(store.live_page_count(), 40);
}

#[test]
fn out_of_place_reopen_returns_checkpoint_state() {
    reopen_returns_checkpoint_state(WritePolicy::OutOfPlace, 4096);
    reopen_returns_checkpoint_state(WritePolicy::OutOfPlace, 24576);
}

#[test]
fn in_place_reopen_rolls_back_with_the_journal() {
    reopen_returns_checkpoint_state(WritePolicy::InPlace, 4096);
    reopen_returns_checkpoint_state(WritePolicy::InPlace, 16384);
}

#[test]
fn cleaner_bounds_the_file_under_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let io: Arc<dyn crate::io::Io> = Arc::new(SyncIo::new(dir.path()).unwrap());
    let mut store_config = config(WritePolicy::OutOfPlace, 4096);
    store_config.cleaner.protection_period = std::time::Duration::ZERO;
    store_config.cleaner.space_amplification_target = 1.2;
    let (store, _) = open(io, &store_config).unwrap();
    let ids: Vec<PageId> = (0..160)
        .map(|_| store.allocate_page_id().unwrap())
        .collect();
    let mut checkpoint_id = 2;
    for round in 0..60u64 {
        for (index, &id) in ids.iter().enumerate() {
            if (index as u64 + round).is_multiple_of(3) {
                store.write_pages(&[(id, &image(id, round, 4096))]).unwrap();
            }
        }
        while store.clean(false).unwrap() > 0 && store.wants_checkpoint() {
            checkpoint(store.as_ref(), checkpoint_id, &[]);
            checkpoint_id += 1;
        }
        checkpoint(store.as_ref(), checkpoint_id, &[]);
        checkpoint_id += 1;
        store.check().unwrap();
    }
    let stats = store.stats();
    let live_bytes = 160 * 4096;
    assert!(stats.segments_cleaned > 0, "{stats:?}");
    assert!(
        stats.file_size_bytes <= live_bytes * 4,
        "file grew unbounded: {stats:?}"
    );
    assert!(stats.write_amplification >= 1.0);
}
