//! The acknowledgements a child prints, and what the harness remembers of
//! a cycle until the next check.

/// One acknowledgement line of `corelog append`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ack {
    pub(crate) base_offset: u64,
    pub(crate) messages: u64,
    pub(crate) bytes: u64,
}

pub(crate) fn parse_ack(line: &str, partition: u64) -> Result<Ack, String> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("ack line {line:?}: {e}"))?;
    let o = v
        .as_object()
        .ok_or_else(|| format!("ack line {line:?} is not an object"))?;
    let field = |k: &str| {
        o.get(k)
            .and_then(|x| x.as_u64())
            .ok_or_else(|| format!("ack line {line:?} lacks {k}"))
    };
    if o.len() != 4 || field("partition")? != partition {
        return Err(format!(
            "ack line {line:?} is not for partition {partition}"
        ));
    }
    Ok(Ack {
        base_offset: field("base_offset")?,
        messages: field("messages")?,
        bytes: field("bytes")?,
    })
}

/// A cycle whose child ran since the last check.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) cycle: u64,
    /// Batches written whole to the child's stdin (at most these can be
    /// stored).
    pub(crate) sent: u64,
    pub(crate) acks: Vec<Ack>,
}
