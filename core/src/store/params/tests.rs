//! The bounds every params struct checks (G15).

use std::time::Duration;

use super::*;
use crate::keys::{OwnerId, QueueName};
use crate::model::{ItemId, LeaseToken, NewItem};
use crate::time::Timestamp;

fn q() -> QueueName {
    QueueName::new("q").unwrap()
}
fn owner() -> OwnerId {
    OwnerId::new("w").unwrap()
}

/// A token named twice is refused in a short batch (checked pairwise) and in a
/// long one (checked sorted), wherever the two copies sit; distinct tokens pass.
#[test]
fn a_token_twice_is_refused_in_short_and_long_batches() {
    let l = Limits::default();
    for len in [2usize, 16, 17, 200] {
        let tokens: Vec<LeaseToken> = (0..len)
            .map(|_| LeaseToken::new(crate::ItemId::new(), 1, crate::LeaseId::mint()))
            .collect();
        assert!(CompleteParams::new(tokens.clone()).validate(&l).is_ok());
        for (a, b) in [(0, len - 1), (len / 2, len / 2 - 1)] {
            let mut dup = tokens.clone();
            dup[a] = dup[b];
            let e = CompleteParams::new(dup).validate(&l).unwrap_err();
            assert_eq!(e.invalid_field(), Some("tokens"), "len {len}");
        }
    }
}

#[test]
fn claim_limits_of_zero_and_over_the_maximum_name_limit() {
    let l = Limits::default();
    let s = Duration::from_secs(30);
    assert!(ClaimParams::new(q(), owner(), 1, s).validate(&l).is_ok());
    for bad in [0, 1_001] {
        let e = ClaimParams::new(q(), owner(), bad, s)
            .validate(&l)
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("limit"));
    }
}

#[test]
fn zero_and_absurd_leases_name_lease_for() {
    let l = Limits::default();
    for bad in [Duration::ZERO, Duration::from_secs(90_000)] {
        let e = ClaimParams::new(q(), owner(), 1, bad)
            .validate(&l)
            .unwrap_err();
        assert_eq!(e.invalid_field(), Some("lease_for"));
    }
}

#[test]
fn oversized_payload_names_payload() {
    let l = Limits::default().with_max_payload_bytes(4);
    let e = EnqueueParams::one(NewItem::new(q(), vec![0; 5]))
        .validate(&l)
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("payload"));
}

#[test]
fn repeated_tokens_are_refused() {
    let t = LeaseToken::new(ItemId::new(), 1, crate::LeaseId::mint());
    let e = CompleteParams::new(vec![t, t])
        .validate(&Limits::default())
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("tokens"));
}

#[test]
fn a_claim_over_the_queue_limit_names_queues() {
    let l = Limits::default();
    let s = Duration::from_secs(30);
    let names = |n: usize| -> Vec<QueueName> {
        (0..n)
            .map(|i| QueueName::new(format!("q{i}")).unwrap())
            .collect()
    };
    let at_max = ClaimParams::new(q(), owner(), 1, s).queues(names(l.max_claim_queues));
    assert!(at_max.validate(&l).is_ok());
    let over = ClaimParams::new(q(), owner(), 1, s).queues(names(l.max_claim_queues + 1));
    assert_eq!(
        over.validate(&l).unwrap_err().invalid_field(),
        Some("queues")
    );
}

#[test]
fn run_times_outside_the_schedule_window_name_run_at_or_delay() {
    let l = Limits::default();
    let now = Timestamp::from_micros(1_700_000_000_000_000);
    let w = l.schedule_window;
    for ok in [now + w, now - w, now] {
        let p = EnqueueParams::one(NewItem::new(q(), vec![]).run_at(ok));
        assert!(p.validate(&l).is_ok() && p.validate_schedule(&l, now).is_ok());
    }
    for bad in [
        now + w + Duration::from_micros(1),
        now - w - Duration::from_micros(1),
    ] {
        let p = EnqueueParams::one(NewItem::new(q(), vec![]).run_at(bad));
        let e = p.validate_schedule(&l, now).unwrap_err();
        assert_eq!(e.invalid_field(), Some("run_at"));
    }
    assert!(EnqueueParams::one(NewItem::new(q(), vec![]).delay(w))
        .validate(&l)
        .is_ok());
    let e = EnqueueParams::one(NewItem::new(q(), vec![]).delay(w + Duration::from_secs(1)))
        .validate(&l)
        .unwrap_err();
    assert_eq!(e.invalid_field(), Some("delay"));
}

#[test]
fn long_error_messages_are_cut_on_a_char_boundary() {
    let f = Failure::permanent(
        LeaseToken::new(ItemId::new(), 1, crate::LeaseId::mint()),
        "é".repeat(MAX_ERROR_BYTES),
    );
    assert!(f.error.len() <= MAX_ERROR_BYTES);
}
