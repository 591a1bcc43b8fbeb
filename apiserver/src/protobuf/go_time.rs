//! Go's text forms of instants and durations, as Kubernetes' JSON writes
//! them: RFC 3339 in UTC (`2024-01-02T03:04:05Z`, six fractional digits
//! for `MicroTime`) and `time.Duration`'s `1h0m0s`. Hand-written because
//! they must match Go to the character and take any `i64` without
//! panicking (humantime refuses instants before 1970).

/// Seconds in a day.
const DAY: i64 = 86_400;

/// RFC 3339 text of `seconds` after the Unix epoch, with `micros` as six
/// fractional digits when given; `None` outside the years 0 to 9999, which
/// Go refuses to write.
pub(super) fn rfc3339(seconds: i64, micros: Option<u32>) -> Option<String> {
    let (days, second_of_day) = (seconds.div_euclid(DAY), seconds.rem_euclid(DAY));
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return None;
    }
    let (hour, minute, second) = (
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60,
    );
    let date = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}");
    Some(match micros {
        None => format!("{date}Z"),
        Some(micros) => format!("{date}.{micros:06}Z"),
    })
}

/// Seconds after the Unix epoch and nanoseconds of RFC 3339 text
/// (`2024-01-02T03:04:05Z`, an optional fraction, `Z` or an offset).
pub(super) fn parse_rfc3339(text: &str) -> Option<(i64, u32)> {
    let number = |from: usize, to: usize| -> Option<i64> {
        let digits = text.get(from..to)?;
        digits
            .bytes()
            .all(|byte| byte.is_ascii_digit())
            .then(|| digits.parse().ok())
            .flatten()
    };
    let at = |index: usize, expected: u8| text.as_bytes().get(index) == Some(&expected);
    if !(at(4, b'-') && at(7, b'-') && at(10, b'T') && at(13, b':') && at(16, b':')) {
        return None;
    }
    let (year, month, day) = (number(0, 4)?, number(5, 7)?, number(8, 10)?);
    let (hour, minute, second) = (number(11, 13)?, number(14, 16)?, number(17, 19)?);
    let mut rest = text.get(19..)?;
    let mut nanos = 0_u32;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        let scale = 10_u32.pow(u32::try_from(9 - digits).ok()?);
        nanos = fraction.get(..digits)?.parse::<u32>().ok()? * scale;
        rest = fraction.get(digits..)?;
    }
    let offset = match rest.as_bytes() {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (hours, minutes) = (
                number(text.len() - 5, text.len() - 3)?,
                number(text.len() - 2, text.len())?,
            );
            if hours >= 24 || minutes >= 60 {
                return None;
            }
            let offset = hours * 3600 + minutes * 60;
            if *sign == b'-' {
                -offset
            } else {
                offset
            }
        }
        _ => return None,
    };
    let valid = (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && hour < 24
        && minute < 60
        && second < 60;
    valid.then(|| {
        let seconds = days_from_civil(year, month, day) * DAY + hour * 3600 + minute * 60 + second;
        (seconds - offset, nanos)
    })
}

/// Go's `time.Duration.String`: `0s`, `1.5s`, `1h0m0s`, `300ms`, `-2µs`.
pub(super) fn duration(nanos: i64) -> String {
    let negative = nanos < 0;
    let mut value = nanos.unsigned_abs();
    let text = if value == 0 {
        "0s".to_string()
    } else if value < 1_000_000_000 {
        let (unit, precision) = if value < 1_000 {
            ("ns", 0)
        } else if value < 1_000_000 {
            ("µs", 3)
        } else {
            ("ms", 6)
        };
        let fraction = fraction(&mut value, precision);
        format!("{value}{fraction}{unit}")
    } else {
        let fraction = fraction(&mut value, 9);
        let (seconds, minutes, hours) = (value % 60, value / 60 % 60, value / 3600);
        match (hours, minutes) {
            (0, 0) => format!("{seconds}{fraction}s"),
            (0, _) => format!("{minutes}m{seconds}{fraction}s"),
            _ => format!("{hours}h{minutes}m{seconds}{fraction}s"),
        }
    };
    if negative {
        format!("-{text}")
    } else {
        text
    }
}

/// Nanoseconds of a duration as Go's `time.ParseDuration` reads it: an
/// optional sign, then numbers with optional fractions, each with a unit
/// (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`); `0` alone too.
pub(super) fn parse_duration(text: &str) -> Option<i64> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let whole_digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (whole, after) = rest.split_at(whole_digits);
        let (fraction, after) = match after.strip_prefix('.') {
            Some(after) => after.split_at(after.bytes().take_while(u8::is_ascii_digit).count()),
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let unit_length = after
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_length);
        let unit: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        // Go keeps the fraction's first digits that matter; 18 are plenty
        // below an hour's 3.6e12 nanoseconds.
        let fraction = fraction.get(..fraction.len().min(18)).unwrap_or_default();
        let scale = 10_u128.pow(u32::try_from(fraction.len()).ok()?);
        let fraction: u128 = if fraction.is_empty() {
            0
        } else {
            fraction.parse().ok()?
        };
        total = total
            .checked_add(whole.checked_mul(unit)?)?
            .checked_add(fraction * unit / scale)?;
        if total > 1 << 63 {
            return None;
        }
        rest = after;
    }
    if negative {
        0_i128
            .checked_sub(i128::try_from(total).ok()?)?
            .try_into()
            .ok()
    } else {
        total.try_into().ok()
    }
}

/// Splits the last `precision` decimal digits off `value` as Go writes a
/// fraction: `.5`, `.25`, nothing when they are zeros.
fn fraction(value: &mut u64, precision: u32) -> String {
    let scale = 10_u64.pow(precision);
    let digits = *value % scale;
    *value /= scale;
    if digits == 0 {
        return String::new();
    }
    let text = format!("{digits:0width$}", width = precision as usize);
    format!(".{}", text.trim_end_matches('0'))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date `days` after 1970-01-01 (Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_and_write_as_go_does() {
        assert_eq!(rfc3339(0, None).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(
            rfc3339(1_704_164_645, None).as_deref(),
            Some("2024-01-02T03:04:05Z")
        );
        assert_eq!(
            rfc3339(1_704_164_645, Some(120)).as_deref(),
            Some("2024-01-02T03:04:05.000120Z")
        );
        assert_eq!(rfc3339(-1, None).as_deref(), Some("1969-12-31T23:59:59Z"));
        assert_eq!(rfc3339(i64::MAX, None), None);
        assert_eq!(rfc3339(i64::MIN, None), None);
        assert_eq!(
            parse_rfc3339("2024-01-02T03:04:05Z"),
            Some((1_704_164_645, 0))
        );
        assert_eq!(
            parse_rfc3339("2024-01-02T04:04:05.5+01:00"),
            Some((1_704_164_645, 500_000_000))
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T00:00:00Z").map(|(s, _)| s),
            Some(1_709_164_800)
        );
        for bad in [
            "",
            "2023-02-29T00:00:00Z",
            "2024-01-02 03:04:05Z",
            "2024-01-02T03:04:05",
            "2024-01-02T24:00:00Z",
            "2024-01-02T03:04:05.Z",
            "2024-01-02T03:04:05+1:00",
            "+024-01-02T03:04:05Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn durations_read_and_write_as_go_does() {
        for (nanos, text) in [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (300_000_000, "300ms"),
            (30_000_000_000, "30s"),
            (1_500_000_000, "1.5s"),
            (90_000_000_000, "1m30s"),
            (3_600_000_000_000, "1h0m0s"),
            (-3_600_000_000_000, "-1h0m0s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ] {
            assert_eq!(duration(nanos), text);
            assert_eq!(parse_duration(text), Some(nanos), "{text}");
        }
        assert_eq!(parse_duration("1h30m"), Some(5_400_000_000_000));
        assert_eq!(parse_duration("0"), Some(0));
        assert_eq!(parse_duration(".5s"), Some(500_000_000));
        for bad in ["", "1", "s", "1x", "-", "3000000h", "1..5s"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
