//! Decoding script answers into the model. An answer our scripts never give is
//! [`Error::Internal`](tenure_core::Error).

use redis::Value;
use tenure_core::{
    DedupKey, Item, ItemId, ItemState, LeaseId, OwnerId, Progress, QueueName, Result, ScopeKey,
    StreamKey, Timestamp,
};
use uuid::Uuid;

use crate::error::bad_reply;

/// An item hash in `HGETALL` form: field, value, field, value...
pub(crate) type Flat = Vec<Vec<u8>>;

fn text(v: Vec<u8>, field: &str) -> Result<String> {
    String::from_utf8(v).map_err(|_| bad_reply(format!("item field {field} is not UTF-8")))
}

/// Parses an integer field: an optional `-` and decimal digits, as the functions
/// write them (`N()` in `lib.lua`). By hand, digit by digit: a claimed item's numbers
/// are most of what decoding a claim costs the client, and `str::parse` checks UTF-8
/// and signs it never meets.
pub(crate) fn int(v: &[u8], field: &str) -> Result<i64> {
    let (negative, digits) = match v {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, v),
    };
    let bad = || bad_reply(format!("item field {field} is not an integer"));
    if digits.is_empty() || digits.len() > 19 {
        return Err(bad());
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(bad());
        }
        let d = i64::from(d - b'0');
        n = n
            .checked_mul(10)
            .and_then(|n| {
                if negative {
                    n.checked_sub(d)
                } else {
                    n.checked_add(d)
                }
            })
            .ok_or_else(bad)?;
    }
    Ok(n)
}

/// Parses an item id.
pub(crate) fn id_of(s: &str) -> Result<ItemId> {
    Uuid::parse_str(s)
        .map(ItemId::from_uuid)
        .map_err(|_| bad_reply(format!("{s:?} is not an item id")))
}

/// The numbers of an item hash's `n` field (`lib.lua` describes the layout), in
/// order: priority, run_at, stalls, max_attempts, max_stalls, max_renewals,
/// created_at, then the enqueue sequence and the partition hash, which only the
/// functions read.
struct Numbers {
    priority: i16,
    run_at: Timestamp,
    stalls: u32,
    max_attempts: u32,
    max_stalls: u32,
    max_renewals: u32,
    created_at: Timestamp,
}

/// Splits a space-separated field into its integers, naming `field` when one is
/// missing or malformed.
struct Ints<'a> {
    parts: std::slice::Split<'a, u8, fn(&u8) -> bool>,
    field: &'static str,
}

fn space(b: &u8) -> bool {
    *b == b' '
}

impl<'a> Ints<'a> {
    fn new(v: &'a [u8], field: &'static str) -> Self {
        Ints {
            parts: v.split(space as fn(&u8) -> bool),
            field,
        }
    }

    fn word(&mut self) -> Result<&'a [u8]> {
        self.parts
            .next()
            .ok_or_else(|| bad_reply(format!("item field {} is too short", self.field)))
    }

    fn int(&mut self) -> Result<i64> {
        let w = self.word()?;
        int(w, self.field)
    }

    fn u32(&mut self) -> Result<u32> {
        let n = self.int()?;
        u32::try_from(n)
            .map_err(|_| bad_reply(format!("item field {} is out of range", self.field)))
    }

    fn time(&mut self) -> Result<Timestamp> {
        self.int().map(Timestamp::from_micros)
    }
}

fn numbers(v: &[u8]) -> Result<Numbers> {
    let mut n = Ints::new(v, "n");
    Ok(Numbers {
        priority: i16::try_from(n.int()?)
            .map_err(|_| bad_reply("item field n has a priority out of range"))?,
        run_at: n.time()?,
        stalls: n.u32()?,
        max_attempts: n.u32()?,
        max_stalls: n.u32()?,
        max_renewals: n.u32()?,
        created_at: n.time()?,
    })
}

/// The text fields every decoded item has.
struct Texts {
    queue: QueueName,
    payload: Vec<u8>,
    stream: Option<StreamKey>,
    scope: Option<ScopeKey>,
    dedup_key: Option<DedupKey>,
    last_error: Option<String>,
}

fn need(v: Option<Vec<u8>>, name: &str) -> Result<Vec<u8>> {
    v.ok_or_else(|| bad_reply(format!("item field {name} is missing")))
}

fn opt_text(v: Option<Vec<u8>>, name: &str) -> Result<Option<String>> {
    v.map(|v| text(v, name)).transpose()
}

fn texts([q, pl, st, sc, dk, e]: [Option<Vec<u8>>; 6]) -> Result<Texts> {
    Ok(Texts {
        queue: QueueName::new(text(need(q, "q")?, "q")?)?,
        payload: need(pl, "pl")?,
        stream: opt_text(st, "st")?.map(StreamKey::new).transpose()?,
        scope: opt_text(sc, "sc")?.map(ScopeKey::new).transpose()?,
        dedup_key: opt_text(dk, "dk")?.map(DedupKey::new).transpose()?,
        last_error: opt_text(e, "e")?,
    })
}

/// Decodes the item hash of `id` in `HGETALL` form (`lib.lua` describes its fields).
pub(crate) fn item(id: ItemId, flat: Flat) -> Result<Item> {
    const NAMES: [&str; 10] = ["q", "pl", "st", "sc", "dk", "e", "s", "n", "l", "pg"];
    let mut fields: [Option<Vec<u8>>; 10] = Default::default();
    let mut it = flat.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        if let Some(i) = NAMES.iter().position(|f| f.as_bytes() == k.as_slice()) {
            fields[i] = Some(v);
        }
    }
    let [q, pl, st, sc, dk, e, s, n, l, pg] = fields;
    let progress = match pg {
        None => None,
        Some(pg) => Some(
            Progress::decode(&text(pg, "pg")?)
                .map_err(|e| bad_reply(format!("item field pg: {e}")))?,
        ),
    };
    let t = texts([q, pl, st, sc, dk, e])?;
    let n = numbers(&need(n, "n")?)?;
    let s = need(s, "s")?;
    let mut state = Ints::new(&s, "s");
    let state_word = std::str::from_utf8(state.word()?)
        .ok()
        .and_then(|w| w.parse::<ItemState>().ok())
        .ok_or_else(|| bad_reply("item field s does not start with a state"))?;
    let attempt = state.u32()?;
    let renewals = state.u32()?;
    let updated_at = state.time()?;
    // Then the mark and the queue (layout 4), and once claimed the lease of the latest
    // claim (layout 5; none, `LeaseId::NONE`, on an item last written by layout 4).
    let lease = match (state.word(), state.word(), state.word()) {
        (Ok(_), Ok(_), Ok(lid)) => std::str::from_utf8(lid)
            .ok()
            .and_then(|w| w.parse::<LeaseId>().ok())
            .ok_or_else(|| bad_reply("item field s has a lease that is not hex"))?,
        _ => LeaseId::NONE,
    };
    let (owner, lease_expires_at) = match l {
        None => (None, None),
        Some(l) => {
            let mut lease = Ints::new(&l, "l");
            let owner = text(lease.word()?.to_vec(), "l")?;
            (Some(OwnerId::new(owner)?), Some(lease.time()?))
        }
    };
    Ok(Item {
        id,
        queue: t.queue,
        payload: t.payload,
        stream: t.stream,
        scope: t.scope,
        dedup_key: t.dedup_key,
        priority: n.priority,
        run_at: n.run_at,
        state: state_word,
        attempt,
        owner,
        lease_expires_at,
        renewals,
        stalls: n.stalls,
        max_attempts: n.max_attempts,
        max_stalls: n.max_stalls,
        max_renewals: n.max_renewals,
        last_error: t.last_error,
        created_at: n.created_at,
        updated_at,
        lease,
        progress,
    })
}

/// The next value of a function's answer as bytes, `None` for an absent field (Lua's
/// `false`) or a missing value.
fn field(f: &mut impl Iterator<Item = Value>, name: &str) -> Result<Option<Vec<u8>>> {
    match f.next() {
        Some(Value::BulkString(b)) => Ok(Some(b)),
        None | Some(Value::Nil | Value::Boolean(false)) => Ok(None),
        Some(Value::SimpleString(s)) => Ok(Some(s.into_bytes())),
        Some(_) => Err(bad_reply(format!("item field {name} is not a string"))),
    }
}

/// A claimed item's queue and keys: from the array that follows its four values, or
/// the claim's only queue and no keys when there is none.
type Keys = (
    QueueName,
    Option<StreamKey>,
    Option<ScopeKey>,
    Option<DedupKey>,
    Option<String>,
);

fn claimed_keys(extra: Option<Vec<Value>>, queues: &[QueueName]) -> Result<Keys> {
    let Some(extra) = extra else {
        return match queues {
            [q] => Ok((q.clone(), None, None, None, None)),
            _ => Err(bad_reply(
                "a claimed item of a claim of several queues did not name its queue",
            )),
        };
    };
    if extra.len() != 5 {
        return Err(bad_reply(
            "a claimed item's keys answered with the wrong number of fields",
        ));
    }
    let mut e = extra.into_iter();
    let q = need(field(&mut e, "q")?, "q")?;
    let queue = match queues.iter().find(|k| k.as_str().as_bytes() == q) {
        Some(k) => k.clone(),
        None => QueueName::new(text(q, "q")?)?,
    };
    let mut key = |name| field(&mut e, name)?.map(|b| text(b, name)).transpose();
    Ok((
        queue,
        key("st")?.map(StreamKey::new).transpose()?,
        key("sc")?.map(ScopeKey::new).transpose()?,
        key("dk")?.map(DedupKey::new).transpose()?,
        key("e")?,
    ))
}

/// Decodes the items the claim function answered (`claim.lua` gives the flat shape:
/// four values an item, then an array of its queue and keys unless the claim named
/// one queue and the item has none), each as it was before the claim: ready with no
/// owner, expiry or renewals, its `updated_at` standing at `created_at` until the
/// caller applies the claim (`machine::claim`), which sets all of them. `queues` are
/// the claim's queues: an item without the array is an item of the only one, and the
/// array's queue is shared with the one it names rather than copied.
pub(crate) fn claimed_items(answer: Vec<Value>, queues: &[QueueName]) -> Result<Vec<Item>> {
    let mut out = Vec::with_capacity(answer.len() / 4);
    let mut f = answer.into_iter().peekable();
    while f.peek().is_some() {
        let id = need(field(&mut f, "id")?, "id")?;
        let id = Uuid::try_parse_ascii(&id)
            .map(ItemId::from_uuid)
            .map_err(|_| bad_reply("a claimed item's id is not an item id"))?;
        let attempt = Ints::new(&need(field(&mut f, "a")?, "a")?, "a").u32()?;
        let payload = need(field(&mut f, "pl")?, "pl")?;
        let n = numbers(&need(field(&mut f, "n")?, "n")?)?;
        let extra = match f.next_if(|v| matches!(v, Value::Array(_))) {
            Some(Value::Array(extra)) => Some(extra),
            _ => None,
        };
        let (queue, stream, scope, dedup_key, last_error) = claimed_keys(extra, queues)?;
        out.push(Item {
            id,
            queue,
            payload,
            stream,
            scope,
            dedup_key,
            priority: n.priority,
            run_at: n.run_at,
            state: ItemState::Ready,
            attempt,
            owner: None,
            lease_expires_at: None,
            renewals: 0,
            stalls: n.stalls,
            max_attempts: n.max_attempts,
            max_stalls: n.max_stalls,
            max_renewals: n.max_renewals,
            last_error,
            created_at: n.created_at,
            updated_at: n.created_at,
            lease: LeaseId::NONE,
            // Not read on the claim path: a new attempt has reported none.
            progress: None,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn the_claim_function_reads_the_state_then_the_answered_fields_in_decoding_order() {
        let lua = include_str!("scripts/claim.lua");
        let names = |at: &str| -> Vec<String> {
            let start = lua.find(at).unwrap();
            let call = &lua[start..start + lua[start..].find(')').unwrap()];
            call.split('\'')
                .skip(3)
                .step_by(2)
                .map(str::to_owned)
                .collect()
        };
        // `s` is checked; `pl` and `n` follow the token in both shapes; the keys, read
        // only for a marked item (with the limit key, which is not answered), follow
        // the queue in the array of the long one, in the order claimed_items decodes
        // them. The general path's walk reads them all in one call (`fields`).
        assert_eq!(names("redis.call('HMGET', key, 's'"), ["s", "pl", "n"]);
        assert_eq!(
            names("redis.call('HMGET', key, 'st'"),
            ["st", "sc", "dk", "e", "lk"]
        );
        for (text, count) in [
            (
                "redis.call('HMGET', k_item(id), 's', 'pl', 'n', 'st', 'sc', 'dk', 'e', 'lk')",
                1,
            ),
            ("redis.call('HMGET', key, 's', 'pl', 'n')", 2),
            ("redis.call('HMGET', key, 'st', 'sc', 'dk', 'e', 'lk')", 2),
            (
                "out[n + 1], out[n + 2], out[n + 3], out[n + 4] = id, a, v[2], v[3]",
                2,
            ),
            ("out[n + 5] = {q, x[1], x[2], x[3], x[4]}", 2),
        ] {
            assert_eq!(lua.matches(text).count(), count, "{text}");
        }
    }

    #[test]
    fn int_reads_what_the_functions_write_and_refuses_the_rest() {
        for n in [0, 7, -7, 1_700_000_000_000_001, i64::MAX, i64::MIN] {
            assert_eq!(int(n.to_string().as_bytes(), "x").unwrap(), n);
        }
        for bad in [
            "",
            "-",
            "+1",
            "1.5",
            " 1",
            "1a",
            "9223372036854775808",
            "--1",
            "0x10",
        ] {
            let err = int(bad.as_bytes(), "x").unwrap_err();
            assert!(err.to_string().contains("item field x"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn claimed_items_decode_either_shape_from_one_flat_answer() {
        let id = uuid::Uuid::now_v7();
        let q = QueueName::new("q").unwrap();
        let numbers = "-3 1700000000000001 1 5 4 9 1600000000000000 77 12 34";
        let short = |a: &str| vec![b(&id.to_string()), b(a), b("payload"), b(numbers)];
        let items =
            claimed_items([short("2"), short("3")].concat(), std::slice::from_ref(&q)).unwrap();
        assert_eq!(items.len(), 2);
        let short = &items[0];
        assert_eq!(short.id, ItemId::from_uuid(id));
        assert_eq!(short.queue, q);
        assert_eq!(short.payload, b"payload");
        assert!(short.stream.is_none() && short.scope.is_none() && short.dedup_key.is_none());
        assert!(short.last_error.is_none());
        assert_eq!(short.priority, -3);
        assert_eq!(short.run_at, Timestamp::from_micros(1_700_000_000_000_001));
        assert_eq!(
            (
                short.attempt,
                short.stalls,
                short.max_attempts,
                short.max_stalls,
                short.max_renewals
            ),
            (2, 1, 5, 4, 9)
        );
        assert_eq!(
            short.created_at,
            Timestamp::from_micros(1_600_000_000_000_000)
        );
        assert_eq!(short.state, ItemState::Ready);
        assert!(short.owner.is_none() && short.lease_expires_at.is_none());
        assert_eq!(items[1].attempt, 3);

        // A long item between two short ones: the array follows its four values.
        let other = QueueName::new("other").unwrap();
        let long = vec![
            b(&id.to_string()),
            b("0"),
            b(""),
            b(numbers),
            Value::Array(vec![b("other"), b("st"), Value::Nil, b("dk"), b("boom")]),
        ];
        let four = || vec![b(&id.to_string()), b("2"), b("p"), b(numbers)];
        let items = claimed_items(
            [four(), long.clone(), four()].concat(),
            std::slice::from_ref(&q),
        )
        .unwrap();
        assert_eq!(items.len(), 3);
        let long_item = &items[1];
        assert_eq!(long_item.queue, other);
        assert_eq!(long_item.stream.as_ref().map(|s| s.as_str()), Some("st"));
        assert!(long_item.scope.is_none());
        assert_eq!(long_item.dedup_key.as_ref().map(|s| s.as_str()), Some("dk"));
        assert_eq!(long_item.last_error.as_deref(), Some("boom"));
        assert_eq!(long_item.attempt, 0);
        assert_eq!(
            (items[0].queue.clone(), items[2].queue.clone()),
            (q.clone(), q.clone())
        );
        assert!(claimed_items(long, &[q.clone(), other.clone()]).is_ok());

        // An item without the array names no queue, so it only answers a claim of
        // one; a short numbers field, a bad id, a cut-off item or an array of the
        // wrong length is a bad reply, not a panic.
        assert!(claimed_items(four(), &[q.clone(), other]).is_err());
        let bad_n = vec![b(&id.to_string()), b("2"), b("p"), b("1 2 3")];
        assert!(claimed_items(bad_n, std::slice::from_ref(&q)).is_err());
        let bad_id = vec![b("x"), b("2"), b("p"), b(numbers)];
        assert!(claimed_items(bad_id, std::slice::from_ref(&q)).is_err());
        let cut = vec![b(&id.to_string()), b("2"), b("p")];
        assert!(claimed_items(cut, std::slice::from_ref(&q)).is_err());
        let bad_array = [four(), vec![Value::Array(vec![b("q")])]].concat();
        assert!(claimed_items(bad_array, std::slice::from_ref(&q)).is_err());
        assert!(claimed_items(Vec::new(), std::slice::from_ref(&q))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn an_item_hash_decodes_its_state_field_and_its_lease_field() {
        let id = ItemId::from_uuid(uuid::Uuid::now_v7());
        let flat = |pairs: &[(&str, &str)]| -> Flat {
            pairs
                .iter()
                .flat_map(|(k, v)| [k.as_bytes().to_vec(), v.as_bytes().to_vec()])
                .collect()
        };
        let running = item(
            id,
            flat(&[
                ("q", "jobs"),
                ("pl", "x"),
                ("sc", "tenant a"),
                ("s", "running 3 2 1700000000000005"),
                ("n", "0 1700000000000000 1 25 10 6 1600000000000000 9 1 2"),
                ("l", "worker-1 1700000000030005"),
            ]),
        )
        .unwrap();
        assert_eq!(running.id, id);
        assert_eq!(running.state, ItemState::Running);
        assert_eq!((running.attempt, running.renewals), (3, 2));
        assert_eq!(running.owner.as_ref().map(|o| o.as_str()), Some("worker-1"));
        assert_eq!(
            running.lease_expires_at,
            Some(Timestamp::from_micros(1_700_000_000_030_005))
        );
        assert_eq!(
            running.updated_at,
            Timestamp::from_micros(1_700_000_000_000_005)
        );
        assert_eq!(running.scope.as_ref().map(|s| s.as_str()), Some("tenant a"));
        assert_eq!((running.stalls, running.max_attempts), (1, 25));
        let dead = item(
            id,
            flat(&[
                ("q", "jobs"),
                ("pl", ""),
                ("s", "dead 3 0 1700000000000009"),
                ("n", "0 1700000000000000 1 25 10 6 1600000000000000 9 1 2"),
            ]),
        )
        .unwrap();
        assert_eq!(dead.state, ItemState::Dead);
        assert!(dead.owner.is_none() && dead.lease_expires_at.is_none());
        // A state field that names no state is a bad reply.
        let bad = item(
            id,
            flat(&[
                ("q", "jobs"),
                ("pl", ""),
                ("s", "gone 3 0 1"),
                ("n", "0 1 1 25 10 6 1 9 1 2"),
            ]),
        );
        assert!(bad.is_err());
    }
}
