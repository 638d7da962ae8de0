//! Consumer groups with Iggy's SDK: members share a topic's partitions
//! and read every message exactly once between them; partitions move when
//! a member leaves or its connection ends; a stale owner or a non-member
//! is fenced; the group's offsets survive a restart.

mod common;

use common::{client, fill, fill_id, fill_partition, named, start, stream_and_topic};
use iggy::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const PARTITIONS: u32 = 6;
const PER_PARTITION: u32 = 40;

fn group() -> Consumer {
    Consumer::group(named("g"))
}

/// The partitions each member (by position in `members`) owns, as the
/// server's GET_CONSUMER_GROUP says, by member id.
async fn assignment(c: &IggyClient) -> BTreeMap<u32, Vec<u32>> {
    common::group_members(c).await.into_iter().collect()
}

/// One poll by a member through the SDK (it picks one of its partitions).
async fn poll_next(c: &IggyClient, count: u32) -> PolledMessages {
    c.poll_messages(
        &named("s"),
        &named("t"),
        None,
        &group(),
        &PollingStrategy::next(),
        count,
        true,
    )
    .await
    .expect("poll")
}

/// `members` members poll with `next` and auto commit, side by side,
/// until every message is read; returns, per member, the (partition, id)
/// of every message it got.
async fn read_all_with(members: usize) -> (Vec<Vec<(u32, u128)>>, BTreeMap<u32, Vec<u32>>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let admin = client(&server).await;
    stream_and_topic(&admin, "s", "t", PARTITIONS).await;
    fill(&admin, "s", "t", PARTITIONS, PER_PARTITION, 100).await;
    admin
        .create_consumer_group(&named("s"), &named("t"), "g")
        .await
        .expect("create group");
    let mut clients = Vec::new();
    for _ in 0..members {
        let c = client(&server).await;
        c.join_consumer_group(&named("s"), &named("t"), &named("g"))
            .await
            .expect("join");
        clients.push(c);
    }
    let assigned = assignment(&admin).await;
    let total = (PARTITIONS * PER_PARTITION) as usize;
    let read = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for c in clients {
        let read = read.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(30);
            while read.load(std::sync::atomic::Ordering::SeqCst) < total {
                assert!(Instant::now() < deadline, "members read everything in time");
                let polled = poll_next(&c, 7).await;
                read.fetch_add(polled.messages.len(), std::sync::atomic::Ordering::SeqCst);
                got.extend(
                    polled
                        .messages
                        .iter()
                        .map(|m| (polled.partition_id, m.header.id)),
                );
                if polled.messages.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            got
        }));
    }
    let mut per_member = Vec::new();
    for t in tasks {
        per_member.push(t.await.expect("member"));
    }
    drop(server);
    (per_member, assigned)
}

fn check_exactly_once(per_member: &[Vec<(u32, u128)>], assigned: &BTreeMap<u32, Vec<u32>>) {
    // The server dealt every partition to exactly one member.
    let mut dealt: Vec<u32> = assigned.values().flatten().copied().collect();
    dealt.sort_unstable();
    assert_eq!(dealt, (0..PARTITIONS).collect::<Vec<_>>(), "{assigned:?}");
    assert_eq!(assigned.len(), per_member.len());
    // Every message exactly once across the members.
    let mut ids: Vec<u128> = per_member.iter().flatten().map(|(_, id)| *id).collect();
    ids.sort_unstable();
    let want: Vec<u128> = (0..PARTITIONS)
        .flat_map(|p| (0..PER_PARTITION).map(move |i| fill_id(p, i)))
        .collect();
    assert_eq!(ids, want, "every message once");
    // No partition read by two members: each member's messages come from
    // the partitions dealt to it, and each from the partition it names.
    let owners: Vec<BTreeSet<u32>> = per_member
        .iter()
        .map(|got| got.iter().map(|(p, _)| *p).collect())
        .collect();
    for (i, a) in owners.iter().enumerate() {
        for b in owners.iter().skip(i + 1) {
            assert!(a.is_disjoint(b), "members shared partitions: {owners:?}");
        }
    }
    for (p, id) in per_member.iter().flatten() {
        assert_eq!(*p, fill_partition(*id), "message {id} from partition {p}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_read_every_message_exactly_once() {
    let (per_member, assigned) = read_all_with(2).await;
    assert!(
        per_member.iter().all(|m| !m.is_empty()),
        "both members read"
    );
    check_exactly_once(&per_member, &assigned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_read_every_message_exactly_once() {
    let (per_member, assigned) = read_all_with(3).await;
    assert!(assigned.values().all(|p| p.len() == 2), "{assigned:?}");
    check_exactly_once(&per_member, &assigned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_move_when_a_member_leaves_or_disconnects() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let admin = client(&server).await;
    stream_and_topic(&admin, "s", "t", 3).await;
    fill(&admin, "s", "t", 3, 10, 10).await;
    admin
        .create_consumer_group(&named("s"), &named("t"), "g")
        .await
        .expect("create group");
    let (a, b) = (client(&server).await, client(&server).await);
    for c in [&a, &b] {
        c.join_consumer_group(&named("s"), &named("t"), &named("g"))
            .await
            .expect("join");
    }
    let two = assignment(&admin).await;
    assert_eq!(two.values().map(Vec::len).collect::<Vec<_>>(), vec![2, 1]);
    // A reads one of its partitions, then leaves: B owns all three and
    // reads the rest, from the group's offsets.
    let first = poll_next(&a, 100).await;
    assert_eq!(first.messages.len(), 10);
    a.leave_consumer_group(&named("s"), &named("t"), &named("g"))
        .await
        .expect("leave");
    let one = assignment(&admin).await;
    assert_eq!(one.values().next().map(Vec::len), Some(3), "{one:?}");
    let mut seen: Vec<u128> = first.messages.iter().map(|m| m.header.id).collect();
    for _ in 0..6 {
        let polled = poll_next(&b, 100).await;
        seen.extend(polled.messages.iter().map(|m| m.header.id));
    }
    seen.sort_unstable();
    let want: Vec<u128> = (0..3)
        .flat_map(|p| (0..10).map(move |i| fill_id(p, i)))
        .collect();
    assert_eq!(seen, want, "every message once across the hand-over");
    // C joins, B's connection ends: C alone owns everything.
    let c = client(&server).await;
    c.join_consumer_group(&named("s"), &named("t"), &named("g"))
        .await
        .expect("join");
    assert_eq!(assignment(&admin).await.len(), 2);
    b.disconnect().await.expect("disconnect");
    drop(b);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = assignment(&admin).await;
        if now.len() == 1 {
            assert_eq!(now.values().next().map(Vec::len), Some(3));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the ended connection left: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Everything was read: C finds nothing new.
    fill(&admin, "s", "t", 3, 1, 10).await;
    let mut more = Vec::new();
    for _ in 0..6 {
        more.extend(
            poll_next(&c, 100)
                .await
                .messages
                .iter()
                .map(|m| m.header.id),
        );
    }
    more.sort_unstable();
    assert_eq!(more, vec![fill_id(0, 0), fill_id(1, 0), fill_id(2, 0)]);
    // Signing out ends the membership too.
    c.logout_user().await.expect("logout");
    assert!(assignment(&admin).await.is_empty(), "no members left");
}

/// A poll of partition `p` for the group, as an application naming the
/// partition sends it (the SDK resolves nothing).
async fn explicit(c: &IggyClient, p: u32) -> PolledMessages {
    c.poll_messages(
        &named("s"),
        &named("t"),
        Some(p),
        &group(),
        &PollingStrategy::next(),
        10,
        true,
    )
    .await
    .expect("poll")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_owner_and_a_non_member_are_fenced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let admin = client(&server).await;
    stream_and_topic(&admin, "s", "t", 2).await;
    fill(&admin, "s", "t", 2, 5, 10).await;
    admin
        .create_consumer_group(&named("s"), &named("t"), "g")
        .await
        .expect("create group");
    let a = client(&server).await;
    a.join_consumer_group(&named("s"), &named("t"), &named("g"))
        .await
        .expect("join");
    assert_eq!(explicit(&a, 1).await.messages.len(), 5, "A owns both");
    let me = a.get_me().await.expect("me");
    let groups: Vec<(u32, u32, u32)> = me
        .consumer_groups
        .iter()
        .map(|g| (g.stream_id, g.topic_id, g.group_id))
        .collect();
    assert_eq!(groups, vec![(0, 0, 0)], "a client lists its groups");
    assert_eq!(admin.get_me().await.expect("me").consumer_groups.len(), 0);
    assert_eq!(
        admin
            .get_stats()
            .await
            .expect("stats")
            .consumer_groups_count,
        1
    );
    // B joins: partition 1 is B's now; A asking for it is fenced.
    let b = client(&server).await;
    b.join_consumer_group(&named("s"), &named("t"), &named("g"))
        .await
        .expect("join");
    let fenced = explicit(&a, 1).await;
    assert!(fenced.messages.is_empty());
    assert_eq!(fenced.partition_id, u32::MAX, "the re-sync sentinel");
    let stored = a
        .store_consumer_offset(&group(), &named("s"), &named("t"), Some(1), 0)
        .await;
    assert!(
        matches!(stored, Err(IggyError::ConsumerGroupPartitionNotOwned(..))),
        "{stored:?}"
    );
    // The group's offset of partition 1 is where A left it.
    let offset = admin
        .get_consumer_offset(&group(), &named("s"), &named("t"), Some(1))
        .await
        .expect("offset")
        .expect("stored");
    assert_eq!(offset.stored_offset, 4);
    // A non-member: fenced with an explicit partition, refused without.
    let x = client(&server).await;
    assert_eq!(explicit(&x, 0).await.partition_id, u32::MAX);
    let refused = x
        .poll_messages(
            &named("s"),
            &named("t"),
            None,
            &group(),
            &PollingStrategy::next(),
            10,
            true,
        )
        .await;
    assert!(
        matches!(refused, Err(IggyError::ConsumerGroupMemberNotFound(..))),
        "{refused:?}"
    );
    // A group that does not exist cannot be joined.
    let missing = x
        .join_consumer_group(&named("s"), &named("t"), &named("nope"))
        .await;
    assert!(
        matches!(missing, Err(IggyError::ConsumerGroupIdNotFound(..))),
        "{missing:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_definitions_and_offsets_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let admin = client(&server).await;
    stream_and_topic(&admin, "s", "t", 2).await;
    fill(&admin, "s", "t", 2, 20, 10).await;
    let created = admin
        .create_consumer_group(&named("s"), &named("t"), "g")
        .await
        .expect("create group");
    assert_eq!((created.name.as_str(), created.partitions_count), ("g", 2));
    admin
        .create_consumer_group(&named("s"), &named("t"), "other")
        .await
        .expect("create group");
    assert!(matches!(
        admin
            .create_consumer_group(&named("s"), &named("t"), "g")
            .await,
        Err(IggyError::ConsumerGroupNameAlreadyExists(..))
    ));
    let a = client(&server).await;
    a.join_consumer_group(&named("s"), &named("t"), &named("g"))
        .await
        .expect("join");
    let mut before = Vec::new();
    for _ in 0..2 {
        before.extend(poll_next(&a, 15).await.messages.iter().map(|m| m.header.id));
    }
    assert_eq!(before.len(), 30);
    drop((a, admin));
    server.shutdown().expect("shutdown");
    let server = start(dir.path());
    let admin = client(&server).await;
    let groups = admin
        .get_consumer_groups(&named("s"), &named("t"))
        .await
        .expect("groups");
    let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, vec!["g", "other"]);
    assert!(
        groups.iter().all(|g| g.members_count == 0),
        "members are per connection"
    );
    let a = client(&server).await;
    a.join_consumer_group(&named("s"), &named("t"), &named("g"))
        .await
        .expect("join");
    let mut after = Vec::new();
    for _ in 0..4 {
        after.extend(poll_next(&a, 15).await.messages.iter().map(|m| m.header.id));
    }
    let mut all: Vec<u128> = before.into_iter().chain(after).collect();
    all.sort_unstable();
    let want: Vec<u128> = (0..2)
        .flat_map(|p| (0..20).map(move |i| fill_id(p, i)))
        .collect();
    assert_eq!(
        all, want,
        "the group continues where it was, across the restart"
    );
    // Deleting the group forgets it; a new one of that name starts over.
    admin
        .delete_consumer_group(&named("s"), &named("t"), &named("g"))
        .await
        .expect("delete");
    assert!(admin
        .get_consumer_group(&named("s"), &named("t"), &named("g"))
        .await
        .expect("get")
        .is_none());
    admin
        .create_consumer_group(&named("s"), &named("t"), "g")
        .await
        .expect("again");
    a.join_consumer_group(&named("s"), &named("t"), &named("g"))
        .await
        .expect("join");
    assert_eq!(
        poll_next(&a, 100).await.messages.len(),
        20,
        "from the start"
    );
}

/// Members come and go while others poll: every message is still read
/// exactly once (a moved partition's next poll waits for its previous
/// owner's to end, and reads from the offset that poll committed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_joining_and_leaving_mid_read_still_read_everything_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path());
    let admin = client(&server).await;
    stream_and_topic(&admin, "s", "t", PARTITIONS).await;
    fill(&admin, "s", "t", PARTITIONS, PER_PARTITION, 100).await;
    admin
        .create_consumer_group(&named("s"), &named("t"), "g")
        .await
        .expect("create group");
    let total = (PARTITIONS * PER_PARTITION) as usize;
    let read = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let member = |server_addr: String,
                  read: std::sync::Arc<std::sync::atomic::AtomicUsize>,
                  polls: Option<usize>| async move {
        let c = IggyClient::builder()
            .with_tcp()
            .with_server_address(server_addr)
            .build()
            .expect("client");
        c.connect().await.expect("connect");
        c.login_user("iggy", "iggy").await.expect("login");
        c.join_consumer_group(&named("s"), &named("t"), &named("g"))
            .await
            .expect("join");
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut n = 0;
        while read.load(std::sync::atomic::Ordering::SeqCst) < total && polls.is_none_or(|p| n < p)
        {
            assert!(Instant::now() < deadline, "members read everything in time");
            let polled = poll_next(&c, 3).await;
            read.fetch_add(polled.messages.len(), std::sync::atomic::Ordering::SeqCst);
            got.extend(polled.messages.iter().map(|m| m.header.id));
            n += 1;
            tokio::task::yield_now().await;
        }
        if polls.is_some() {
            c.leave_consumer_group(&named("s"), &named("t"), &named("g"))
                .await
                .expect("leave");
        }
        got
    };
    let addr = server.local_addr().to_string();
    // One stays to the end; one leaves after 20 polls; one joins late.
    let staying = tokio::spawn(member(addr.clone(), read.clone(), None));
    let leaving = tokio::spawn(member(addr.clone(), read.clone(), Some(20)));
    tokio::time::sleep(Duration::from_millis(30)).await;
    let late = tokio::spawn(member(addr, read.clone(), None));
    let mut ids = Vec::new();
    for t in [staying, leaving, late] {
        ids.extend(t.await.expect("member"));
    }
    ids.sort_unstable();
    let want: Vec<u128> = (0..PARTITIONS)
        .flat_map(|p| (0..PER_PARTITION).map(move |i| fill_id(p, i)))
        .collect();
    assert_eq!(ids, want, "every message once");
}
