//! A manifest commit is one PUT, made only while this node may commit: a
//! failed or refused one leaves the manifest as it was, in memory (its
//! generation counts the commits the store took) and in the store.
#![allow(clippy::unwrap_used)]

use corelog_tier::upload::{commit, load_manifest};
use corelog_tier::{Manifest, MemoryStore, TierError};

#[test]
fn a_failed_or_refused_commit_leaves_the_manifest_as_it_was() {
    let store = MemoryStore::new();
    let mut m = Manifest::new(7);
    commit(&store, &mut m, &|| true).unwrap();
    assert_eq!(m.generation, 1);

    store.set_down(true);
    assert!(commit(&store, &mut m, &|| true).is_err());
    assert_eq!(m.generation, 1, "a failed PUT is no commit");
    store.set_down(false);
    assert!(matches!(
        commit(&store, &mut m, &|| false),
        Err(TierError::Deposed { partition: 7, .. })
    ));
    assert_eq!(m.generation, 1, "a deposed leader commits nothing");
    assert_eq!(load_manifest(&store, 7).unwrap().generation, 1);

    commit(&store, &mut m, &|| true).unwrap();
    assert_eq!(m.generation, 2);
    assert_eq!(load_manifest(&store, 7).unwrap(), m);
}
