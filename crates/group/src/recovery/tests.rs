use super::*;

const CLUSTER: Uuid = Uuid([7; 16]);

fn view(seqno: i64, members: &[&str], own: &str) -> LastPrimaryView {
    LastPrimaryView::new(
        CLUSTER,
        Seqno(seqno),
        3,
        own,
        members.iter().map(|m| m.to_string()),
    )
    .expect("a valid view")
}

fn report(address: &str, view_seqno: i64, members: &[&str], position: i64) -> RecoveryReport {
    RecoveryReport {
        address: address.into(),
        holds_data: true,
        last_view: Some(view(view_seqno, members, address)),
        position: Some(Gtid {
            cluster: CLUSTER,
            seqno: Seqno(position),
        }),
        standing: Standing::Outside,
    }
}

const ABC: [&str; 3] = ["a:1", "b:1", "c:1"];

#[test]
fn the_saved_view_reads_back_and_damage_is_refused() {
    let saved = view(10, &["b:1", "a:1", "b:1"], "a:1");
    assert_eq!(saved.members, vec!["a:1".to_string(), "b:1".to_string()]);
    let text = saved.render();
    assert_eq!(LastPrimaryView::parse(&text), Some(saved.clone()));
    for damaged in [
        text.replace("version: 1", "version: 2"),
        text.replace("seqno: 10", "seqno: x"),
        text.replace("seqno: 10", "seqno: -1"),
        text.replace("member: a:1\n", ""),
        text.replace("member: b:1\n", "member: b:1\nmember: b:1\n"),
        text.lines().take(3).collect::<Vec<_>>().join("\n"),
        String::new(),
    ] {
        assert_eq!(LastPrimaryView::parse(&damaged), None, "{damaged}");
    }
    assert_eq!(
        LastPrimaryView::new(CLUSTER, Seqno(1), 1, "z:1", ["a:1".to_string()]),
        None,
        "this node must be a member"
    );
}

#[test]
fn the_most_advanced_member_founds_once_everyone_is_back() {
    let a = report("a:1", 10, &ABC, 40);
    let b = report("b:1", 10, &ABC, 55);
    let c = report("c:1", 10, &ABC, 52);
    assert_eq!(decide(&b, &[&a, &c]), Decision::Found);
    let follow = Decision::Follow {
        founder: "b:1".into(),
        seqno: Seqno(55),
    };
    assert_eq!(decide(&a, &[&b, &c]), follow);
    assert_eq!(decide(&c, &[&a, &b]), follow);
    // A tie goes to the smallest address, the same on every node.
    let c_tied = report("c:1", 10, &ABC, 55);
    assert_eq!(decide(&c_tied, &[&a, &b]), follow);
}

#[test]
fn a_missing_member_or_an_unknown_position_means_waiting() {
    let a = report("a:1", 10, &ABC, 60);
    let b = report("b:1", 10, &ABC, 55);
    let Decision::Wait(waiting) = decide(&a, &[&b]) else {
        panic!("c is missing");
    };
    assert_eq!(waiting.missing, vec!["c:1".to_string()]);
    assert_eq!(waiting.most_advanced, Some(("a:1".to_string(), Seqno(60))));
    let described = waiting.describe();
    assert!(described.contains("waiting for c:1"), "{described}");
    assert!(described.contains("a:1 (seqno 60)"), "{described}");
    let mut c = report("c:1", 10, &ABC, 1);
    c.position = None;
    let Decision::Wait(waiting) = decide(&a, &[&b, &c]) else {
        panic!("c's position is unknown: it may be the most advanced");
    };
    assert_eq!(waiting.unknown_position, vec!["c:1".to_string()]);
    c.position = Some(Gtid {
        cluster: Uuid([9; 16]),
        seqno: Seqno(99),
    });
    assert!(
        matches!(decide(&a, &[&b, &c]), Decision::Wait(_)),
        "a position in another history is not a position in this one"
    );
    let mut survivor = report("c:1", 10, &ABC, 70);
    survivor.standing = Standing::NonPrimary;
    let Decision::Wait(waiting) = decide(&a, &[&b, &survivor]) else {
        panic!("c still runs in the old group");
    };
    assert_eq!(waiting.non_primary, vec!["c:1".to_string()]);
}

#[test]
fn a_member_without_data_counts_as_back_but_never_founds() {
    let a = report("a:1", 10, &ABC, 40);
    let b = report("b:1", 10, &ABC, 55);
    let arbitrator = RecoveryReport {
        address: "c:1".into(),
        holds_data: false,
        last_view: None,
        position: None,
        standing: Standing::Outside,
    };
    assert_eq!(decide(&b, &[&a, &arbitrator]), Decision::Found);
    assert!(matches!(
        decide(&a, &[&b, &arbitrator]),
        Decision::Follow { .. }
    ));
    // Still stranded in the old group, it does not hold the restore either.
    let stranded = RecoveryReport {
        standing: Standing::NonPrimary,
        ..arbitrator
    };
    assert_eq!(decide(&b, &[&a, &stranded]), Decision::Found);
}

#[test]
fn the_newest_view_decides_who_must_be_back() {
    // c was removed by the view at seqno 20, which a applied and b had not yet; c kept the
    // older view. The newer view {a, b} is the one to restore.
    let a = report("a:1", 20, &["a:1", "b:1"], 70);
    let b = report("b:1", 10, &ABC, 19);
    let c = report("c:1", 10, &ABC, 90);
    assert_eq!(
        decide(&c, &[&a, &b]),
        Decision::Join(NoRecovery::NotInNewestView(Seqno(20)))
    );
    assert_eq!(decide(&a, &[&b, &c]), Decision::Found);
    // b had not applied the newer view, but is a member of it: it follows a.
    assert!(matches!(decide(&b, &[&a, &c]), Decision::Follow { founder, .. } if founder == "a:1"));
    // Without a, the newer view is unknown to c and b, and c's older one is incomplete
    // without a: nobody founds.
    assert!(matches!(decide(&c, &[&b]), Decision::Wait(_)));
}

#[test]
fn a_live_primary_component_is_joined_not_recovered() {
    let a = report("a:1", 10, &ABC, 40);
    let mut b = report("b:1", 10, &ABC, 55);
    b.standing = Standing::Primary;
    assert_eq!(
        decide(&a, &[&b]),
        Decision::Join(NoRecovery::LivePrimary("b:1".into()))
    );
    let mut fresh = a.clone();
    fresh.last_view = None;
    assert_eq!(decide(&fresh, &[]), Decision::Join(NoRecovery::NoSavedView));
}

#[test]
fn a_node_alone_in_its_last_view_founds_by_itself() {
    let a = report("a:1", 10, &["a:1"], 40);
    assert_eq!(decide(&a, &[]), Decision::Found);
}

#[test]
fn implausible_reports_are_refused() {
    let mut bad = report("a:1", 10, &ABC, 40);
    bad.holds_data = false;
    assert!(bad.check().is_err());
    let mut bad = report("a:1", 10, &ABC, 40);
    bad.address = "x".repeat(ADDRESS_BYTES_MAX + 1);
    assert!(bad.check().is_err());
    let mut bad = report("a:1", 10, &ABC, 40);
    bad.last_view.as_mut().unwrap().members.push("a:1".into());
    assert!(bad.check().is_err());
    assert!(report("a:1", 10, &ABC, 40).check().is_ok());
}
