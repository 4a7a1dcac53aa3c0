//! HF's `strftime_now(format)` global (Llama 3 templates print today's date with it), for
//! the common directives, in UTC.

use std::time::{SystemTime, UNIX_EPOCH};

use minijinja::{Error, ErrorKind};

const MONTHS: [&str; 12] =
    ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

pub fn strftime_now(format: String) -> Result<String, Error> {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format_utc(&format, secs)
}

fn format_utc(format: &str, secs: u64) -> Result<String, Error> {
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let (hh, mm, ss) = (secs % 86_400 / 3600, secs % 3600 / 60, secs % 60);
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out += &format!("{y}"),
            Some('m') => out += &format!("{m:02}"),
            Some('d') => out += &format!("{d:02}"),
            Some('B') => out += MONTHS[m as usize - 1],
            Some('b') => out += &MONTHS[m as usize - 1][..3],
            Some('H') => out += &format!("{hh:02}"),
            Some('M') => out += &format!("{mm:02}"),
            Some('S') => out += &format!("{ss:02}"),
            Some('%') => out.push('%'),
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("strftime_now: unsupported directive %{}", other.unwrap_or(' ')),
                ));
            }
        }
    }
    Ok(out)
}

/// Days since 1970-01-01 to (year, month, day), Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_a_known_instant() {
        // 2024-02-29 13:05:09 UTC
        assert_eq!(super::format_utc("%d %b %Y, %B %H:%M:%S %%", 1_709_211_909).unwrap(), "29 Feb 2024, February 13:05:09 %");
    }
}
