//! Decoding script answers into the model. An answer our scripts never give is
//! [`Error::Internal`](tenure_core::Error).

use std::collections::HashMap;

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

/// Decodes one item hash.
pub(crate) fn item(flat: Flat) -> Result<Item> {
    let mut f: HashMap<String, Vec<u8>> = HashMap::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        f.insert(text(k, "name")?, v);
    }
    let mut take = |name: &str| f.remove(name);
    let need = |v: Option<Vec<u8>>, name: &str| {
        v.ok_or_else(|| bad_reply(format!("item field {name} is missing")))
    };
    let id = id_of(&text(need(take("id"), "id")?, "id")?)?;
    let queue = QueueName::new(text(need(take("q"), "q")?, "q")?)?;
    let payload = need(take("pl"), "pl")?;
    let stream = take("st")
        .map(|v| text(v, "st"))
        .transpose()?
        .map(StreamKey::new)
        .transpose()?;
    let scope = take("sc")
        .map(|v| text(v, "sc"))
        .transpose()?
        .map(ScopeKey::new)
        .transpose()?;
    let dedup_key = take("dk")
        .map(|v| text(v, "dk"))
        .transpose()?
        .map(DedupKey::new)
        .transpose()?;
    let priority = i16::try_from(int(&need(take("pr"), "pr")?, "pr")?)
        .map_err(|_| bad_reply("item field pr is out of range"))?;
    let time = |v: Vec<u8>, name: &str| int(&v, name).map(Timestamp::from_micros);
    let run_at = time(need(take("ra"), "ra")?, "ra")?;
    let state: ItemState = text(need(take("s"), "s")?, "s")?
        .parse()
        .map_err(|_| bad_reply("item field s is not a state"))?;
    let attempt = u32_of(&need(take("a"), "a")?, "a")?;
    let owner = take("o")
        .map(|v| text(v, "o"))
        .transpose()?
        .map(OwnerId::new)
        .transpose()?;
    let lease_expires_at = take("le").map(|v| time(v, "le")).transpose()?;
    let renewals = u32_of(&need(take("rn"), "rn")?, "rn")?;
    let stalls = u32_of(&need(take("sl"), "sl")?, "sl")?;
    let max_attempts = u32_of(&need(take("ma"), "ma")?, "ma")?;
    let max_stalls = u32_of(&need(take("ms"), "ms")?, "ms")?;
    let max_renewals = u32_of(&need(take("mr"), "mr")?, "mr")?;
    let last_error = take("e").map(|v| text(v, "e")).transpose()?;
    let created_at = time(need(take("ca"), "ca")?, "ca")?;
    let updated_at = time(need(take("ua"), "ua")?, "ua")?;
    Ok(Item {
        id,
        queue,
        payload,
        stream,
        scope,
        dedup_key,
        priority,
        run_at,
        state,
        attempt,
        owner,
        lease_expires_at,
        renewals,
        stalls,
        max_attempts,
        max_stalls,
        max_renewals,
        last_error,
        created_at,
        updated_at,
    })
}
