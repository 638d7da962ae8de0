//! The visible end: where readers stop. Every segment's `visible` end
//! covers only completed writes (and, under `fsync=batch`, durable ones),
//! and under a commit mark (`commit.rs`) only committed batches.

use super::partition::{Mark, State};
use super::scan::header_at;
use super::segment::Visible;
use crate::format::layout::BATCH_HEADER_LEN;

/// Makes `mark` the visible end: its segment up to it, older ones whole.
pub(super) fn set_visible<F>(st: &mut State<F>, mark: Mark) {
    // Under a commit mark, readers stop at the lower of the two.
    let mark = match st.commit {
        Some(cap) if mark.next_offset > cap => match capped(st, mark, cap) {
            Some(m) => m,
            None => return,
        },
        _ => mark,
    };
    for seg in st.segments.iter_mut().rev() {
        if seg.base_offset > mark.segment {
            continue;
        }
        if seg.base_offset == mark.segment {
            seg.visible = Visible {
                len: mark.end,
                next_offset: mark.next_offset,
                last_batch: mark.last_batch,
                last_timestamp: mark.last_timestamp,
            };
            continue;
        }
        if seg.visible.len == seg.len {
            break;
        }
        seg.visible = seg.fully_visible();
    }
    st.waiters.moved();
}

/// The visible end under a commit mark `cap` below the acknowledgement
/// mark `ack`: after the last batch ending at or below `cap`, found by
/// walking the batch headers forward from the segment's visible end
/// (bytes below `ack`, so written), or `None` when nothing more may be
/// seen.
fn capped<F>(st: &State<F>, ack: Mark, cap: u64) -> Option<Mark> {
    let i = st
        .segments
        .partition_point(|s| s.base_offset <= cap)
        .checked_sub(1)?;
    let seg = &st.segments[i];
    if seg.base_offset > ack.segment || seg.visible.next_offset > cap {
        return None;
    }
    let limit = if seg.base_offset == ack.segment {
        ack.end
    } else {
        seg.len
    };
    let map = match seg.mapping() {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(
                "{}: not mapped, the commit mark waits: {e}",
                seg.log_path.display()
            );
            return None;
        }
    };
    let data = map.slice(0..usize::try_from(limit).ok()?)?;
    let v = seg.visible;
    let (mut pos, mut next, mut last_batch, mut ts) =
        (v.len, v.next_offset, v.last_batch, v.last_timestamp);
    while let Some(p) = header_at(data, pos) {
        let Some(end) = pos.checked_add(p.batch_length) else {
            break;
        };
        if p.batch_length < BATCH_HEADER_LEN as u64 || end > limit || p.next_offset() > cap {
            break;
        }
        last_batch = Some(pos);
        ts = p.base_timestamp;
        next = p.next_offset();
        pos = end;
    }
    Some(Mark {
        segment: seg.base_offset,
        end: pos,
        next_offset: next,
        last_batch,
        last_timestamp: ts,
    })
}
