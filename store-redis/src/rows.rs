//! Decoding script answers into the model. An answer our scripts never give is
//! [`Error::Internal`](tenure_core::Error).

use tenure_core::{
    DedupKey, Item, ItemId, ItemState, OwnerId, QueueName, Result, ScopeKey, StreamKey, Timestamp,
};
use uuid::Uuid;

use crate::error::bad_reply;

/// An item hash in `HGETALL` form: field, value, field, value...
pub(crate) type Flat = Vec<Vec<u8>>;

fn text(v: Vec<u8>, field: &str) -> Result<String> {
    String::from_utf8(v).map_err(|_| bad_reply(format!("item field {field} is not UTF-8")))
}

/// Parses an integer field.
pub(crate) fn int(v: &[u8], field: &str) -> Result<i64> {
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad_reply(format!("item field {field} is not an integer")))
}

fn u32_of(v: &[u8], field: &str) -> Result<u32> {
    u32::try_from(int(v, field)?)
        .map_err(|_| bad_reply(format!("item field {field} is out of range")))
}

/// Parses an item id.
pub(crate) fn id_of(s: &str) -> Result<ItemId> {
    Uuid::parse_str(s)
        .map(ItemId::from_uuid)
        .map_err(|_| bad_reply(format!("{s:?} is not an item id")))
}

/// An item's fields in a fixed order ([`ITEM_FIELDS`], or a claim's answer), `None`
/// for an absent field.
pub(crate) type Fields = Vec<Option<Vec<u8>>>;

/// The item hash's field names, in [`Fields`] order.
const ITEM_FIELDS: [&str; 20] = [
    "id", "q", "pl", "st", "sc", "dk", "pr", "ra", "s", "a", "o", "le", "rn", "sl", "ma", "ms",
    "mr", "e", "ca", "ua",
];

/// Decodes one item hash in `HGETALL` form.
pub(crate) fn item(flat: Flat) -> Result<Item> {
    let mut fields: Fields = vec![None; ITEM_FIELDS.len()];
    let mut it = flat.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        if let Some(i) = ITEM_FIELDS
            .iter()
            .position(|f| f.as_bytes() == k.as_slice())
        {
            fields[i] = Some(v);
        }
    }
    item_fields(fields)
}

/// What the claim script answers of each item it claims, in this order (it knows
/// the first two, the id and the queue; `claim.lua` names the others in its `HMGET`,
/// then `s`, which it checks is `ready`): every field of
/// [`ITEM_FIELDS`] but `s`, `o` and `le` (a ready item has neither), `rn` and `ua`,
/// all of which the claim overwrites. It answers the text fields `id q pl st sc dk
/// e`, then the numbers `pr ra a sl ma ms mr ca` as one string, space-separated: a
/// value fewer to convert on the server and to parse here is time saved per item.
/// (Only the test below reads it; it is the order's one written record.)
#[cfg(test)]
const CLAIMED_FIELDS: [&str; 15] = [
    "id", "q", "pl", "st", "sc", "dk", "pr", "ra", "a", "sl", "ma", "ms", "mr", "e", "ca",
];

/// Decodes an item the claim script answered (see `CLAIMED_FIELDS`), as it was
/// before the claim: `ready`, no owner or expiry, no renewals; its `updated_at`
/// stands at `created_at` until the caller applies the claim, which sets it.
pub(crate) fn claimed_item(fields: Fields) -> Result<Item> {
    let Ok::<[Option<Vec<u8>>; 8], _>([id, q, pl, st, sc, dk, e, numbers]) = fields.try_into()
    else {
        return Err(bad_reply(
            "a claimed item answered with the wrong number of fields",
        ));
    };
    let need = |v: Option<Vec<u8>>, name: &str| {
        v.ok_or_else(|| bad_reply(format!("item field {name} is missing")))
    };
    let opt_text = |v: Option<Vec<u8>>, name: &str| v.map(|v| text(v, name)).transpose();
    let numbers = need(numbers, "numbers")?;
    let mut parts = numbers.split(|b| *b == b' ');
    let mut next = |name: &str| {
        parts
            .next()
            .ok_or_else(|| bad_reply(format!("item field {name} is missing")))
            .and_then(|v| int(v, name))
    };
    let u32_next = |n: i64, name: &str| {
        u32::try_from(n).map_err(|_| bad_reply(format!("item field {name} is out of range")))
    };
    let priority =
        i16::try_from(next("pr")?).map_err(|_| bad_reply("item field pr is out of range"))?;
    let run_at = Timestamp::from_micros(next("ra")?);
    let attempt = u32_next(next("a")?, "a")?;
    let stalls = u32_next(next("sl")?, "sl")?;
    let max_attempts = u32_next(next("ma")?, "ma")?;
    let max_stalls = u32_next(next("ms")?, "ms")?;
    let max_renewals = u32_next(next("mr")?, "mr")?;
    let created_at = Timestamp::from_micros(next("ca")?);
    Ok(Item {
        id: id_of(&text(need(id, "id")?, "id")?)?,
        queue: QueueName::new(text(need(q, "q")?, "q")?)?,
        payload: need(pl, "pl")?,
        stream: opt_text(st, "st")?.map(StreamKey::new).transpose()?,
        scope: opt_text(sc, "sc")?.map(ScopeKey::new).transpose()?,
        dedup_key: opt_text(dk, "dk")?.map(DedupKey::new).transpose()?,
        priority,
        run_at,
        state: ItemState::Ready,
        attempt,
        owner: None,
        lease_expires_at: None,
        renewals: 0,
        stalls,
        max_attempts,
        max_stalls,
        max_renewals,
        last_error: opt_text(e, "e")?,
        created_at,
        updated_at: created_at,
    })
}

/// Decodes an item answered in [`Fields`] order.
pub(crate) fn item_fields(fields: Fields) -> Result<Item> {
    let Ok::<[Option<Vec<u8>>; 20], _>(
        [id, q, pl, st, sc, dk, pr, ra, s, a, o, le, rn, sl, ma, ms, mr, e, ca, ua],
    ) = fields.try_into()
    else {
        return Err(bad_reply(
            "an item answered with the wrong number of fields",
        ));
    };
    let need = |v: Option<Vec<u8>>, name: &str| {
        v.ok_or_else(|| bad_reply(format!("item field {name} is missing")))
    };
    let time = |v: Vec<u8>, name: &str| int(&v, name).map(Timestamp::from_micros);
    let opt_text = |v: Option<Vec<u8>>, name: &str| v.map(|v| text(v, name)).transpose();
    Ok(Item {
        id: id_of(&text(need(id, "id")?, "id")?)?,
        queue: QueueName::new(text(need(q, "q")?, "q")?)?,
        payload: need(pl, "pl")?,
        stream: opt_text(st, "st")?.map(StreamKey::new).transpose()?,
        scope: opt_text(sc, "sc")?.map(ScopeKey::new).transpose()?,
        dedup_key: opt_text(dk, "dk")?.map(DedupKey::new).transpose()?,
        priority: i16::try_from(int(&need(pr, "pr")?, "pr")?)
            .map_err(|_| bad_reply("item field pr is out of range"))?,
        run_at: time(need(ra, "ra")?, "ra")?,
        state: text(need(s, "s")?, "s")?
            .parse::<ItemState>()
            .map_err(|_| bad_reply("item field s is not a state"))?,
        attempt: u32_of(&need(a, "a")?, "a")?,
        owner: opt_text(o, "o")?.map(OwnerId::new).transpose()?,
        lease_expires_at: le.map(|v| time(v, "le")).transpose()?,
        renewals: u32_of(&need(rn, "rn")?, "rn")?,
        stalls: u32_of(&need(sl, "sl")?, "sl")?,
        max_attempts: u32_of(&need(ma, "ma")?, "ma")?,
        max_stalls: u32_of(&need(ms, "ms")?, "ms")?,
        max_renewals: u32_of(&need(mr, "mr")?, "mr")?,
        last_error: opt_text(e, "e")?,
        created_at: time(need(ca, "ca")?, "ca")?,
        updated_at: time(need(ua, "ua")?, "ua")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claim_script_reads_the_claimed_fields_in_order_then_the_state() {
        let lua = include_str!("scripts/claim.lua");
        let start = lua.find("redis.call('HMGET', key, ").unwrap();
        let call = &lua[start..start + lua[start..].find(')').unwrap()];
        let names: Vec<&str> = call.split('\'').skip(3).step_by(2).collect();
        // The id and queue the script knows, so it reads the rest, then the state.
        let mut want = CLAIMED_FIELDS[2..].to_vec();
        want.push("s");
        assert_eq!(names, want);
        assert_eq!(CLAIMED_FIELDS[..2], ["id", "q"]);
        // Every claimed field is an item field, and those left out are the ones a
        // claim overwrites.
        let left_out: Vec<&str> = ITEM_FIELDS
            .iter()
            .copied()
            .filter(|f| !CLAIMED_FIELDS.contains(f))
            .collect();
        assert_eq!(left_out, ["s", "o", "le", "rn", "ua"]);
    }

    #[test]
    fn a_claimed_item_decodes_its_text_fields_and_its_numbers_in_order() {
        let id = uuid::Uuid::now_v7();
        let f = |s: &str| Some(s.as_bytes().to_vec());
        let item = claimed_item(vec![
            f(&id.to_string()),
            f("q"),
            f("payload"),
            f("st"),
            None,
            f("dk"),
            f("boom"),
            f("-3 1700000000000001 2 1 5 4 9 1600000000000000"),
        ])
        .unwrap();
        assert_eq!(item.id, ItemId::from_uuid(id));
        assert_eq!(item.queue.as_str(), "q");
        assert_eq!(item.payload, b"payload");
        assert_eq!(item.stream.as_ref().map(|s| s.as_str()), Some("st"));
        assert!(item.scope.is_none());
        assert_eq!(item.dedup_key.as_ref().map(|s| s.as_str()), Some("dk"));
        assert_eq!(item.last_error.as_deref(), Some("boom"));
        assert_eq!(item.priority, -3);
        assert_eq!(item.run_at, Timestamp::from_micros(1_700_000_000_000_001));
        assert_eq!(
            (
                item.attempt,
                item.stalls,
                item.max_attempts,
                item.max_stalls,
                item.max_renewals
            ),
            (2, 1, 5, 4, 9)
        );
        assert_eq!(
            item.created_at,
            Timestamp::from_micros(1_600_000_000_000_000)
        );
        assert_eq!(item.state, ItemState::Ready);
        assert!(item.owner.is_none() && item.lease_expires_at.is_none());
        // A short numbers string is a bad reply, not a panic.
        let short = claimed_item(vec![
            f(&id.to_string()),
            f("q"),
            f("p"),
            None,
            None,
            None,
            None,
            f("1 2 3"),
        ]);
        assert!(short.is_err());
    }
}
