//! Calendar arithmetic, time zones and date strings for the date operators (MongoDB's
//! `TimeZone`, `TimeZoneDatabase`, `dateAdd`, `dateDiff`, `truncateDate` in
//! date_time_support.cpp, which wrap timelib).
//!
//! - Dates are signed milliseconds since the Unix epoch (BSON dates); the calendar is the
//!   proleptic Gregorian one over the whole `i64` range (days are counted in `i64`, so no
//!   year is out of reach).
//! - A [`Tz`] is UTC, a fixed offset (`"+05:30"`, `"-0800"`, `"+03"`) or an IANA zone from
//!   the database bundled with `jiff` (names are case-sensitive, as in MongoDB). Local wall
//!   times convert to instants as timelib's `do_adjust_timezone` does: a time in a DST gap
//!   moves forward by the gap, an ambiguous time in an overlap takes the offset in force at
//!   "the local time read as UTC" (the earlier instant west of Greenwich, the later one east
//!   of it, exactly like timelib).
//! - [`format`] renders `%`-format strings (`$dateToString`); [`parse_with_format`] and
//!   [`parse_free`] read date strings (`$dateFromString` with and without `format`), the latter
//!   accepting the ISO 8601 forms and the common textual forms timelib's `strtotime` reads.
//!
//! Invariants: nothing here panics; every arithmetic step that could overflow is checked or
//! done in `i128`; instants outside `jiff`'s range use the offset at the nearest end of it.

use jiff::Timestamp;
use jiff::tz::TimeZone as Zone;

use crate::error::{QueryError, Result};

/// Milliseconds in a day.
pub(crate) const MS_PER_DAY: i64 = 86_400_000;

fn loc(code: i32, msg: impl Into<String>) -> QueryError {
    QueryError::Location(code, msg.into())
}

/// ConversionFailure.
pub(crate) const CONVERSION_FAILURE: i32 = 241;

fn conversion(msg: impl Into<String>) -> QueryError {
    QueryError::Location(CONVERSION_FAILURE, msg.into())
}

// ---------------------------------------------------------------------------------------------
// Calendar
// ---------------------------------------------------------------------------------------------

/// Days since 1970-01-01 of a (year, month, day) in the proleptic Gregorian calendar (month
/// 1–12, day 1–31; other values are not normalized here).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 → (year, month, day).
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub(crate) fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

pub(crate) fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Day of week of a day number, 0 = Sunday … 6 = Saturday.
fn weekday_sun0(days: i64) -> i64 {
    (days + 4).rem_euclid(7)
}

/// ISO day of week, 1 = Monday … 7 = Sunday.
fn iso_weekday(days: i64) -> i64 {
    (days + 3).rem_euclid(7) + 1
}

/// Day of year, 1-based.
fn day_of_year(y: i64, days: i64) -> i64 {
    days - days_from_civil(y, 1, 1) + 1
}

/// (ISO week-numbering year, ISO week) of a day number.
fn iso_week(days: i64) -> (i64, i64) {
    // The Thursday of the same ISO week decides the year.
    let thursday = days - iso_weekday(days) + 4;
    let (y, _, _) = civil_from_days(thursday);
    let week = (thursday - days_from_civil(y, 1, 1)) / 7 + 1;
    (y, week)
}

/// Day number of ISO (year, week, weekday), as timelib's `timelib_date_from_isodate`
/// (out-of-range weeks and days carry over).
pub(crate) fn days_from_iso(iy: i64, iw: i64, id: i64) -> i64 {
    let jan1 = days_from_civil(iy, 1, 1);
    let dow = weekday_sun0(jan1);
    let first = if dow > 4 { 7 - dow } else { -dow };
    jan1 + first + (iw - 1) * 7 + id
}

/// A local wall time broken into fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Parts {
    pub(crate) year: i64,
    pub(crate) month: i64,
    pub(crate) day: i64,
    pub(crate) hour: i64,
    pub(crate) minute: i64,
    pub(crate) second: i64,
    pub(crate) millisecond: i64,
    /// Days since 1970-01-01 (local).
    pub(crate) days: i64,
    /// The UTC offset in seconds at that instant.
    pub(crate) offset: i64,
}

impl Parts {
    pub(crate) fn day_of_week(&self) -> i64 {
        weekday_sun0(self.days) + 1
    }

    pub(crate) fn day_of_year(&self) -> i64 {
        day_of_year(self.year, self.days)
    }

    /// `TimeZone::week`: weeks start on Sunday; days before the first Sunday are week 0.
    pub(crate) fn week(&self) -> i64 {
        let prev_sunday = self.day_of_year() - self.day_of_week();
        (prev_sunday + 7) / 7
    }

    pub(crate) fn iso_day_of_week(&self) -> i64 {
        iso_weekday(self.days)
    }

    pub(crate) fn iso_week(&self) -> i64 {
        iso_week(self.days).1
    }

    pub(crate) fn iso_year(&self) -> i64 {
        iso_week(self.days).0
    }
}

/// Local milliseconds (wall time read as UTC) → fields.
fn parts_of_local(local: i128, offset: i64) -> Parts {
    let days = local.div_euclid(i128::from(MS_PER_DAY));
    let ms = local.rem_euclid(i128::from(MS_PER_DAY)) as i64;
    let days = i64::try_from(days).unwrap_or(if days < 0 { i64::MIN / 2 } else { i64::MAX / 2 });
    let (year, month, day) = civil_from_days(days);
    Parts {
        year,
        month,
        day,
        hour: ms / 3_600_000,
        minute: ms / 60_000 % 60,
        second: ms / 1000 % 60,
        millisecond: ms % 1000,
        days,
        offset,
    }
}

// ---------------------------------------------------------------------------------------------
// Time zones
// ---------------------------------------------------------------------------------------------

/// A time zone (`TimeZone`).
#[derive(Clone, Debug)]
pub(crate) enum Tz {
    Utc,
    /// A fixed offset in seconds east of UTC.
    Offset(i64),
    /// An IANA zone.
    Named(Zone),
}

/// `TimeZoneDatabase::parseUtcOffset`: `±HH`, `±HHMM`, `±HH:MM`.
fn parse_utc_offset(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let sign = match b.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digit = |i: usize| {
        b.get(i)
            .filter(|c| c.is_ascii_digit())
            .map(|c| i64::from(c - b'0'))
    };
    let two = |i: usize| Some(digit(i)? * 10 + digit(i + 1)?);
    let secs = match b.len() {
        3 => two(1)? * 3600,
        5 => two(1)? * 3600 + two(3)? * 60,
        6 if b.get(3) == Some(&b':') => two(1)? * 3600 + two(4)? * 60,
        _ => return None,
    };
    Some(sign * secs)
}

fn clamp_second(s: i64) -> i64 {
    s.clamp(Timestamp::MIN.as_second(), Timestamp::MAX.as_second())
}

fn timestamp(s: i64) -> Timestamp {
    Timestamp::from_second(clamp_second(s)).unwrap_or(Timestamp::UNIX_EPOCH)
}

impl Tz {
    /// `TimeZoneDatabase::getTimeZone`: 40485 for unknown identifiers.
    pub(crate) fn parse(id: &str) -> Result<Tz> {
        if id == "UTC" {
            return Ok(Tz::Utc);
        }
        if let Some(off) = parse_utc_offset(id) {
            return Ok(if off == 0 { Tz::Utc } else { Tz::Offset(off) });
        }
        if !id.is_empty()
            && !id.starts_with(['+', '-'])
            && let Ok(zone) = Zone::get(id)
            && zone.iana_name() == Some(id)
        {
            return Ok(Tz::Named(zone));
        }
        Err(loc(
            40485,
            format!("unrecognized time zone identifier: \"{id}\""),
        ))
    }

    pub(crate) fn is_utc(&self) -> bool {
        matches!(self, Tz::Utc)
    }

    /// The offset (seconds east of UTC) in force at the second `s`.
    fn offset_at_second(&self, s: i64) -> i64 {
        match self {
            Tz::Utc => 0,
            Tz::Offset(o) => *o,
            Tz::Named(z) => i64::from(z.to_offset(timestamp(s)).seconds()),
        }
    }

    /// The offset in force at the date `millis`.
    pub(crate) fn offset_at(&self, millis: i64) -> i64 {
        self.offset_at_second(millis.div_euclid(1000))
    }

    /// The local fields of the date `millis`.
    pub(crate) fn parts(&self, millis: i64) -> Parts {
        let offset = self.offset_at(millis);
        parts_of_local(i128::from(millis) + i128::from(offset) * 1000, offset)
    }

    /// The most recent transition at or before the second `s` (zones only).
    fn transition_at_or_before(&self, s: i64) -> Option<i64> {
        let Tz::Named(z) = self else {
            return None;
        };
        let next = timestamp(s.saturating_add(1));
        z.preceding(next).next().map(|t| t.timestamp().as_second())
    }

    /// A local wall time (milliseconds read as UTC) → the instant, as timelib's
    /// `do_adjust_timezone` resolves gaps and overlaps.
    pub(crate) fn to_utc(&self, local: i128) -> i128 {
        match self {
            Tz::Utc => local,
            Tz::Offset(o) => local - i128::from(*o) * 1000,
            Tz::Named(_) => {
                let sse = local.div_euclid(1000);
                let sse64 = i64::try_from(sse).unwrap_or(if sse < 0 { i64::MIN } else { i64::MAX });
                let current = self.offset_at_second(sse64);
                let after_at = sse64.saturating_sub(current);
                let actual = self.offset_at_second(after_at);
                let in_transition = match self.transition_at_or_before(after_at) {
                    Some(t) => {
                        let shifted = sse - i128::from(actual);
                        shifted >= i128::from(t) + i128::from(current - actual)
                            && shifted < i128::from(t)
                    }
                    None => false,
                };
                let adjust = if current != actual && !in_transition {
                    actual
                } else {
                    current
                };
                local - i128::from(adjust) * 1000
            }
        }
    }

    /// The date of local fields (values out of range carry over, as timelib normalizes).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn local_to_date(
        &self,
        year: i64,
        month: i64,
        day: i64,
        hour: i64,
        minute: i64,
        second: i64,
        millisecond: i64,
    ) -> i64 {
        let m0 = month - 1;
        let y = i128::from(year) + i128::from(m0.div_euclid(12));
        let m = m0.rem_euclid(12) + 1;
        let y = i64::try_from(y).unwrap_or(0);
        let days = i128::from(days_from_civil(y, m, 1)) + i128::from(day) - 1;
        self.days_and_time_to_date(days, hour, minute, second, millisecond)
    }

    /// The date of a local day number plus a time of day.
    fn days_and_time_to_date(
        &self,
        days: i128,
        hour: i64,
        minute: i64,
        second: i64,
        millisecond: i64,
    ) -> i64 {
        let local = days * i128::from(MS_PER_DAY)
            + i128::from(hour) * 3_600_000
            + i128::from(minute) * 60_000
            + i128::from(second) * 1000
            + i128::from(millisecond);
        clamp_i64(self.to_utc(local))
    }
}

fn clamp_i64(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

// ---------------------------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------------------------

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// The `%` specifiers `$dateToString` accepts.
const TO_STRING_SPECIFIERS: &str = "bBdGHjLmMSwuUVYzZ";
/// The `%` specifiers `$dateFromString` accepts.
const FROM_STRING_SPECIFIERS: &str = "bBdGHjLmMSwuUVYzZ";

fn validate(format: &str, allowed: &str) -> Result<()> {
    let mut it = format.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            continue;
        }
        match it.next() {
            None => return Err(loc(18535, "Unmatched '%' at end of format string")),
            Some(n) if n == '%' || allowed.contains(n) => {}
            Some(n) => {
                return Err(loc(
                    18536,
                    format!("Invalid format character '%{n}' in format string"),
                ));
            }
        }
    }
    Ok(())
}

/// `TimeZone::validateToStringFormat`.
pub(crate) fn validate_to_string_format(format: &str) -> Result<()> {
    validate(format, TO_STRING_SPECIFIERS)
}

/// `TimeZone::validateFromStringFormat`.
pub(crate) fn validate_from_string_format(format: &str) -> Result<()> {
    validate(format, FROM_STRING_SPECIFIERS)
}

/// `insertPadded`: numbers outside 0–9999 are error 18537.
fn padded(out: &mut String, n: i64, width: usize) -> Result<()> {
    if !(0..=9999).contains(&n) {
        return Err(loc(
            18537,
            format!(
                "Could not convert date to string: date component was outside the supported \
                 range of 0-9999: {n}"
            ),
        ));
    }
    out.push_str(&format!("{n:0width$}"));
    Ok(())
}

/// The ISO format `$dateToString` uses by default.
pub(crate) const ISO_FORMAT: &str = "%Y-%m-%dT%H:%M:%S.%LZ";

/// `TimeZone::formatDate` for a validated format.
pub(crate) fn format(tz: &Tz, format: &str, millis: i64) -> Result<String> {
    let p = tz.parts(millis);
    let mut out = String::with_capacity(format.len() + 16);
    let mut it = format.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = it.next() else {
            break;
        };
        match spec {
            '%' => out.push('%'),
            'Y' => padded(&mut out, p.year, 4)?,
            'm' => padded(&mut out, p.month, 2)?,
            'd' => padded(&mut out, p.day, 2)?,
            'H' => padded(&mut out, p.hour, 2)?,
            'M' => padded(&mut out, p.minute, 2)?,
            'S' => padded(&mut out, p.second, 2)?,
            'L' => padded(&mut out, p.millisecond, 3)?,
            'j' => padded(&mut out, p.day_of_year(), 3)?,
            'w' => padded(&mut out, p.day_of_week(), 1)?,
            'U' => padded(&mut out, p.week(), 2)?,
            'G' => padded(&mut out, p.iso_year(), 4)?,
            'V' => padded(&mut out, p.iso_week(), 2)?,
            'u' => padded(&mut out, p.iso_day_of_week(), 1)?,
            'b' | 'B' => {
                let name = usize::try_from(p.month - 1)
                    .ok()
                    .and_then(|i| MONTHS.get(i))
                    .copied()
                    .unwrap_or("");
                out.push_str(if spec == 'b' {
                    name.get(..3).unwrap_or(name)
                } else {
                    name
                });
            }
            'z' => {
                let off = tz.offset_at_second(millis / 1000);
                out.push(if off < 0 { '-' } else { '+' });
                padded(&mut out, (off / 3600).abs(), 2)?;
                padded(&mut out, (off / 60).abs() % 60, 2)?;
            }
            'Z' => out.push_str(&(tz.offset_at_second(millis / 1000) / 60).to_string()),
            other => {
                out.push('%');
                out.push(other);
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Time units (dateAdd, dateDiff, dateTrunc)
// ---------------------------------------------------------------------------------------------

/// `TimeUnit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    Year,
    Quarter,
    Month,
    Week,
    Day,
    Hour,
    Minute,
    Second,
    Millisecond,
}

impl Unit {
    pub(crate) fn parse(s: &str) -> Option<Unit> {
        Some(match s {
            "year" => Unit::Year,
            "quarter" => Unit::Quarter,
            "month" => Unit::Month,
            "week" => Unit::Week,
            "day" => Unit::Day,
            "hour" => Unit::Hour,
            "minute" => Unit::Minute,
            "second" => Unit::Second,
            "millisecond" => Unit::Millisecond,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Unit::Year => "year",
            Unit::Quarter => "quarter",
            Unit::Month => "month",
            Unit::Week => "week",
            Unit::Day => "day",
            Unit::Hour => "hour",
            Unit::Minute => "minute",
            Unit::Second => "second",
            Unit::Millisecond => "millisecond",
        }
    }

    /// Milliseconds in one unit for the fixed-length units.
    fn fixed_millis(self) -> Option<i64> {
        match self {
            Unit::Hour => Some(3_600_000),
            Unit::Minute => Some(60_000),
            Unit::Second => Some(1000),
            Unit::Millisecond => Some(1),
            _ => None,
        }
    }
}

/// `parseDayOfWeek` (case-insensitive full names and three-letter abbreviations): the ISO
/// day number, 1 = Monday … 7 = Sunday.
pub(crate) fn parse_day_of_week(s: &str) -> Option<i64> {
    Some(match s.to_ascii_lowercase().as_str() {
        "monday" | "mon" => 1,
        "tuesday" | "tue" => 2,
        "wednesday" | "wed" => 3,
        "thursday" | "thu" => 4,
        "friday" | "fri" => 5,
        "saturday" | "sat" => 6,
        "sunday" | "sun" => 7,
        _ => return None,
    })
}

/// The default `startOfWeek` (Sunday).
pub(crate) const SUNDAY: i64 = 7;

/// Position of a day within a week starting on `start_of_week` (0 = first day).
fn day_in_week(days: i64, start_of_week: i64) -> i64 {
    (iso_weekday(days) - start_of_week + 7) % 7
}

fn diff_weeks(start_days: i64, end_days: i64, start_of_week: i64) -> i64 {
    (end_days - start_days + day_in_week(start_days, start_of_week)
        - day_in_week(end_days, start_of_week))
        / 7
}

/// `dateDiff`.
pub(crate) fn date_diff(
    start: i64,
    end: i64,
    unit: Unit,
    tz: &Tz,
    start_of_week: i64,
) -> Result<i64> {
    if unit == Unit::Millisecond {
        return end
            .checked_sub(start)
            .ok_or_else(|| loc(5166308, "dateDiff overflowed"));
    }
    let s = tz.parts(start);
    let e = tz.parts(end);
    let years = e.year - s.year;
    let days = e.days - s.days;
    let hours = e.hour - s.hour + days * 24;
    let minutes = e.minute - s.minute + hours * 60;
    Ok(match unit {
        Unit::Year => years,
        Unit::Quarter => (e.month - 1) / 3 - (s.month - 1) / 3 + years * 4,
        Unit::Month => e.month - s.month + years * 12,
        Unit::Week => diff_weeks(s.days, e.days, start_of_week),
        Unit::Day => days,
        Unit::Hour => hours + (s.offset - e.offset) / 3600,
        Unit::Minute => minutes + (s.offset - e.offset) / 60,
        Unit::Second => e.second - s.second + minutes * 60 + (s.offset - e.offset),
        Unit::Millisecond => 0,
    })
}

/// `isDateAddAmountValid`.
fn add_amount_valid(amount: i64, unit: Unit) -> bool {
    const MAX_DAYS: i64 = (u64::MAX / MS_PER_DAY as u64) as i64 + 1;
    const MAX_YEARS: i64 = MAX_DAYS / 365 + 1;
    let max = match unit {
        Unit::Year => MAX_YEARS,
        Unit::Quarter => MAX_YEARS * 4,
        Unit::Month => MAX_YEARS * 12,
        Unit::Week => MAX_DAYS / 7,
        Unit::Day => MAX_DAYS,
        Unit::Hour => MAX_DAYS * 24,
        Unit::Minute => MAX_DAYS * 24 * 60,
        Unit::Second => MAX_DAYS * 24 * 3600,
        Unit::Millisecond => return true,
    };
    -max < amount && amount < max
}

/// `dateAdd`: units of a day and more keep the local time of day in `tz`; hours and smaller
/// are exact durations.
pub(crate) fn date_add(date: i64, unit: Unit, amount: i64, tz: &Tz) -> Result<i64> {
    let overflow = || loc(5166406, "dateAdd overflowed");
    if unit == Unit::Millisecond {
        return date.checked_add(amount).ok_or_else(overflow);
    }
    if !add_amount_valid(amount, unit) {
        return Err(loc(
            5976500,
            format!(
                "invalid dateAdd 'amount' parameter value: {amount} {}",
                unit.name()
            ),
        ));
    }
    let result: i128 = if let Some(ms) = unit.fixed_millis() {
        i128::from(date) + i128::from(amount) * i128::from(ms)
    } else {
        let p = tz.parts(date);
        let ms_of_day = i128::from(date) + i128::from(p.offset) * 1000
            - i128::from(p.days) * i128::from(MS_PER_DAY);
        let days: i128 = match unit {
            Unit::Day => i128::from(p.days) + i128::from(amount),
            Unit::Week => i128::from(p.days) + i128::from(amount) * 7,
            _ => {
                let months = i128::from(amount)
                    * match unit {
                        Unit::Year => 12,
                        Unit::Quarter => 3,
                        _ => 1,
                    };
                let total = i128::from(p.year) * 12 + i128::from(p.month - 1) + months;
                let y = i64::try_from(total.div_euclid(12)).map_err(|_| overflow())?;
                let m = (total.rem_euclid(12) + 1) as i64;
                let d = p.day.min(days_in_month(y, m));
                i128::from(days_from_civil(y, m, d))
            }
        };
        tz.to_utc(days * i128::from(MS_PER_DAY) + ms_of_day)
    };
    // MongoDB checks that the result's seconds times 1000 fits a long.
    let secs = result.div_euclid(1000);
    if secs
        .checked_mul(1000)
        .is_none_or(|v| i64::try_from(v).is_err())
    {
        return Err(overflow());
    }
    i64::try_from(result).map_err(|_| overflow())
}

/// `truncateDate` with the default reference point (2000-01-01T00:00 local, moved to the next
/// `start_of_week` for weeks).
pub(crate) fn date_trunc(
    date: i64,
    unit: Unit,
    bin_size: i64,
    tz: &Tz,
    start_of_week: i64,
) -> Result<i64> {
    const REFERENCE_UTC: i64 = 946_684_800_000;
    if bin_size <= 0 {
        return Err(loc(5439005, "expected binSize > 0"));
    }
    let mut reference = REFERENCE_UTC - tz.offset_at(REFERENCE_UTC) * 1000;
    let mut ref_day = 1i64;
    if unit == Unit::Week {
        // 2000-01-01 is a Saturday (ISO 6).
        let ref_dow = (6 - start_of_week + 7) % 7;
        let adjust = (7 - ref_dow) % 7;
        reference += adjust * MS_PER_DAY;
        ref_day += adjust;
    }
    let overflow = |code| loc(code, "dateTrunc overflowed");
    if let Some(ms) = unit.fixed_millis() {
        let bin = bin_size.checked_mul(ms).ok_or_else(|| overflow(5439002))?;
        let shifted = date
            .checked_sub(reference)
            .ok_or_else(|| overflow(5439000))?;
        return date
            .checked_sub(shifted.rem_euclid(bin))
            .ok_or_else(|| overflow(5439001));
    }
    if bin_size > 100_000_000_000 {
        return Err(loc(5439006, "dateTrunc unsupported binSize value"));
    }
    let p = tz.parts(date);
    let ref_days = days_from_civil(2000, 1, ref_day);
    let years = p.year - 2000;
    let distance = match unit {
        Unit::Day => p.days - ref_days,
        Unit::Week => diff_weeks(ref_days, p.days, start_of_week),
        Unit::Month => p.month - 1 + years * 12,
        Unit::Quarter => (p.month - 1) / 3 + years * 4,
        _ => years,
    };
    let lower = distance
        .checked_sub(distance.rem_euclid(bin_size))
        .ok_or_else(|| overflow(5439004))?;
    date_add(reference, unit, lower, tz)
}

// ---------------------------------------------------------------------------------------------
// Parsing date strings
// ---------------------------------------------------------------------------------------------

/// Zone information found in a date string.
#[derive(Clone, Debug, PartialEq)]
enum StrZone {
    /// A numeric offset in seconds (`+05:00`).
    Offset(i64),
    /// An abbreviation (`Z`, `UTC`, `EST`) and its offset in seconds.
    Abbr(String, i64),
}

/// The fields read from a date string (`None` is timelib's UNSET).
#[derive(Clone, Debug, Default)]
struct Fields {
    y: Option<i64>,
    m: Option<i64>,
    d: Option<i64>,
    h: Option<i64>,
    i: Option<i64>,
    s: Option<i64>,
    us: i64,
    zone: Option<StrZone>,
    doy: Option<i64>,
    iso_year: Option<i64>,
    iso_week: Option<i64>,
    iso_day: Option<i64>,
    week_u: Option<i64>,
    weekday_w: Option<i64>,
}

/// Time zone abbreviations timelib knows, with their offsets in seconds.
const ABBREVIATIONS: &[(&str, i64)] = &[
    ("z", 0),
    ("utc", 0),
    ("gmt", 0),
    ("ut", 0),
    ("wet", 0),
    ("bst", 3600),
    ("cet", 3600),
    ("cest", 7200),
    ("eet", 7200),
    ("eest", 10800),
    ("msk", 10800),
    ("ist", 19800),
    ("jst", 32400),
    ("est", -18000),
    ("edt", -14400),
    ("cst", -21600),
    ("cdt", -18000),
    ("mst", -25200),
    ("mdt", -21600),
    ("pst", -28800),
    ("pdt", -25200),
    ("akst", -32400),
    ("akdt", -28800),
    ("hst", -36000),
];

fn month_from_name(s: &str) -> Option<i64> {
    let l = s.to_ascii_lowercase();
    MONTHS
        .iter()
        .position(|m| {
            let ml = m.to_ascii_lowercase();
            l == ml || (l.len() == 3 && ml.starts_with(&l)) || (l == "sept" && ml == "september")
        })
        .map(|i| i as i64 + 1)
}

struct Scanner<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn peek_at(&self, k: usize) -> Option<u8> {
        self.s.get(self.pos + k).copied()
    }

    fn eof(&self) -> bool {
        self.pos >= self.s.len()
    }

    /// Up to `max` digits (at least one) as a number, with the count read.
    fn digits(&mut self, max: usize) -> Option<(i64, usize)> {
        let start = self.pos;
        let mut v: i64 = 0;
        while self.pos - start < max
            && let Some(c) = self.peek().filter(u8::is_ascii_digit)
        {
            v = v * 10 + i64::from(c - b'0');
            self.pos += 1;
        }
        (self.pos > start).then_some((v, self.pos - start))
    }

    fn run_of_digits(&self) -> usize {
        self.s
            .get(self.pos..)
            .unwrap_or(&[])
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    }

    fn word(&mut self) -> &str {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            self.pos += 1;
        }
        std::str::from_utf8(self.s.get(start..self.pos).unwrap_or(&[])).unwrap_or("")
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(|c| c == b' ' || c == b'\t') {
            self.pos += 1;
        }
    }
}

fn parse_error(input: &str, pos: usize, msg: &str) -> QueryError {
    let c = input
        .get(pos..)
        .and_then(|r| r.chars().next())
        .unwrap_or(' ');
    conversion(format!(
        "Error parsing date string '{input}'; {pos}: {msg} '{c}'"
    ))
}

/// A numeric offset after its sign: `hh`, `hhmm`, `hh:mm`, `h`.
fn read_offset(sc: &mut Scanner<'_>) -> Option<i64> {
    let negative = match sc.peek()? {
        b'+' => false,
        b'-' => true,
        _ => return None,
    };
    sc.pos += 1;
    let run = sc.run_of_digits();
    let (h, m) = match run {
        1 | 2 => {
            let (h, _) = sc.digits(2)?;
            let m = if sc.peek() == Some(b':') && sc.peek_at(1).is_some_and(|c| c.is_ascii_digit())
            {
                sc.pos += 1;
                sc.digits(2)?.0
            } else {
                0
            };
            (h, m)
        }
        3 => {
            let (v, _) = sc.digits(3)?;
            (v / 100, v % 100)
        }
        4 => {
            let (v, _) = sc.digits(4)?;
            (v / 100, v % 100)
        }
        _ => return None,
    };
    let secs = h * 3600 + m * 60;
    Some(if negative { -secs } else { secs })
}

/// A zone after a date/time: an offset, an abbreviation, or an identifier (refused).
fn read_zone(sc: &mut Scanner<'_>, input: &str, f: &mut Fields) -> Result<()> {
    let start = sc.pos;
    if matches!(sc.peek(), Some(b'+' | b'-')) {
        let Some(off) = read_offset(sc) else {
            return Err(parse_error(
                input,
                start,
                "The timezone could not be found in the database",
            ));
        };
        f.zone = Some(StrZone::Offset(off));
        return Ok(());
    }
    let word = sc.word().to_string();
    if sc.peek() == Some(b'/') || sc.peek() == Some(b'_') {
        return Err(parse_error(
            input,
            start,
            "passing a time zone identifier as part of the string is not allowed",
        ));
    }
    let lower = word.to_ascii_lowercase();
    let Some(&(_, off)) = ABBREVIATIONS.iter().find(|(a, _)| *a == lower) else {
        return Err(parse_error(
            input,
            start,
            "The timezone could not be found in the database",
        ));
    };
    // "GMT+02:00" style: an offset right after GMT/UTC.
    if (lower == "gmt" || lower == "utc") && matches!(sc.peek(), Some(b'+' | b'-')) {
        let Some(o) = read_offset(sc) else {
            return Err(parse_error(
                input,
                sc.pos,
                "The timezone could not be found in the database",
            ));
        };
        f.zone = Some(StrZone::Offset(o));
        return Ok(());
    }
    let abbr = if lower == "z" {
        "Z".to_string()
    } else {
        word.to_ascii_uppercase()
    };
    f.zone = Some(StrZone::Abbr(abbr, off));
    Ok(())
}

/// A time `hh:mm[:ss[.frac]]` with optional am/pm.
fn read_time(sc: &mut Scanner<'_>, input: &str, f: &mut Fields) -> Result<()> {
    let start = sc.pos;
    let bad = |p| parse_error(input, p, "Unexpected character");
    let (h, _) = sc.digits(2).ok_or_else(|| bad(start))?;
    if !sc.eat(b':') {
        return Err(bad(sc.pos));
    }
    let (i, n) = sc.digits(2).ok_or_else(|| bad(sc.pos))?;
    if n != 2 {
        return Err(bad(sc.pos));
    }
    let mut s = 0;
    let mut us = 0;
    if sc.eat(b':') {
        let (v, n) = sc.digits(2).ok_or_else(|| bad(sc.pos))?;
        if n != 2 {
            return Err(bad(sc.pos));
        }
        s = v;
        if matches!(sc.peek(), Some(b'.' | b','))
            && sc.peek_at(1).is_some_and(|c| c.is_ascii_digit())
        {
            sc.pos += 1;
            let run = sc.run_of_digits();
            let (v, n) = sc.digits(6).ok_or_else(|| bad(sc.pos))?;
            us = v * 10i64.pow(u32::try_from(6 - n).unwrap_or(0));
            // Digits beyond microseconds are ignored.
            sc.pos += run.saturating_sub(6);
        }
    }
    let mut h = h;
    let save = sc.pos;
    sc.skip_spaces();
    let ampm = {
        let w_start = sc.pos;
        let w = sc.word().to_ascii_lowercase().replace('.', "");
        match w.as_str() {
            "am" | "a" => Some(false),
            "pm" | "p" => Some(true),
            _ => {
                sc.pos = w_start;
                None
            }
        }
    };
    match ampm {
        Some(pm) => {
            if !(1..=12).contains(&h) {
                return Err(bad(start));
            }
            if h == 12 {
                h = 0;
            }
            if pm {
                h += 12;
            }
        }
        None => sc.pos = save,
    }
    if h > 24 || i > 59 || s > 60 {
        return Err(bad(start));
    }
    f.h = Some(h);
    f.i = Some(i);
    f.s = Some(s);
    f.us = us;
    Ok(())
}

fn set_date(f: &mut Fields, y: i64, m: i64, d: i64) {
    f.y = Some(y);
    f.m = Some(m);
    f.d = Some(d);
}

/// Two-digit years as timelib reads them (`process_year`): below 70 is 20xx, else 19xx.
fn full_year(y: i64, digits: usize) -> i64 {
    if digits <= 2 {
        if y < 70 { 2000 + y } else { 1900 + y }
    } else {
        y
    }
}

/// A date without a format (`timelib_strtotime`, the absolute forms MongoDB users write):
/// ISO 8601 dates and date-times (`T` or space), `YYYY/MM/DD`, `MM/DD/YYYY`, `DD.MM.YYYY`,
/// `DD-MM-YYYY`, textual months (`July 4, 2017`, `4 Jul 2017`, `2017-Jul-04`), times with
/// fractions and am/pm, and zones (`Z`, `+hh[:mm]`, `UTC`, `GMT+hh`, abbreviations).
fn parse_free_fields(input: &str) -> Result<Fields> {
    let mut sc = Scanner {
        s: input.as_bytes(),
        pos: 0,
    };
    let mut f = Fields::default();
    let bad = |p| parse_error(input, p, "Unexpected character");
    sc.skip_spaces();
    let mut have_date = false;
    while !sc.eof() {
        let start = sc.pos;
        let c = sc.peek().unwrap_or(b' ');
        if c == b' ' || c == b'\t' || c == b',' {
            sc.pos += 1;
            continue;
        }
        if (c == b'T' || c == b't')
            && have_date
            && sc.peek_at(1).is_some_and(|d| d.is_ascii_digit())
        {
            sc.pos += 1;
            if f.h.is_some() {
                return Err(parse_error(input, start, "Double time specification"));
            }
            read_time(&mut sc, input, &mut f)?;
            continue;
        }
        if c.is_ascii_digit() {
            let run = sc.run_of_digits();
            let after = sc.peek_at(run);
            if (run == 1 || run == 2) && after == Some(b':') {
                if f.h.is_some() {
                    return Err(parse_error(input, start, "Double time specification"));
                }
                read_time(&mut sc, input, &mut f)?;
                continue;
            }
            if have_date {
                // A year after "July 4," style dates.
                if f.y.is_none() && run == 4 {
                    f.y = sc.digits(4).map(|(v, _)| v);
                    continue;
                }
                return Err(parse_error(input, start, "Double date specification"));
            }
            if run == 8 && matches!(after, Some(b'T' | b't') | None) {
                let (v, _) = sc.digits(8).ok_or_else(|| bad(start))?;
                set_date(&mut f, v / 10_000, v / 100 % 100, v % 100);
                have_date = true;
                continue;
            }
            if run == 4 && matches!(after, Some(b'-' | b'/')) {
                // YYYY-MM-DD, YYYY/MM/DD, YYYY-Mon-DD.
                let (y, _) = sc.digits(4).ok_or_else(|| bad(start))?;
                let sep = sc.peek().unwrap_or(b'-');
                sc.pos += 1;
                let m = if sc.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
                    let w = sc.word().to_string();
                    month_from_name(&w).ok_or_else(|| bad(start))?
                } else {
                    sc.digits(2).ok_or_else(|| bad(sc.pos))?.0
                };
                if !sc.eat(sep) {
                    return Err(bad(sc.pos));
                }
                let (d, _) = sc.digits(2).ok_or_else(|| bad(sc.pos))?;
                if sc.peek().is_some_and(|c| c.is_ascii_digit()) {
                    return Err(bad(sc.pos));
                }
                set_date(&mut f, y, m, d);
                have_date = true;
                continue;
            }
            if run <= 2 && matches!(after, Some(b'/')) {
                // American MM/DD[/YYYY].
                let (m, _) = sc.digits(2).ok_or_else(|| bad(start))?;
                sc.pos += 1;
                let (d, _) = sc.digits(2).ok_or_else(|| bad(sc.pos))?;
                let mut y = None;
                if sc.eat(b'/') {
                    let (v, n) = sc.digits(4).ok_or_else(|| bad(sc.pos))?;
                    y = Some(full_year(v, n));
                }
                f.m = Some(m);
                f.d = Some(d);
                f.y = y;
                have_date = true;
                continue;
            }
            if run <= 2 && matches!(after, Some(b'.' | b'-')) {
                let (d, _) = sc.digits(2).ok_or_else(|| bad(start))?;
                let sep = sc.peek().unwrap_or(b'-');
                sc.pos += 1;
                let m = if sc.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
                    let w = sc.word().to_string();
                    month_from_name(&w).ok_or_else(|| bad(start))?
                } else {
                    sc.digits(2).ok_or_else(|| bad(sc.pos))?.0
                };
                if !sc.eat(sep) {
                    return Err(bad(sc.pos));
                }
                let (y, n) = sc.digits(4).ok_or_else(|| bad(sc.pos))?;
                if sc.peek().is_some_and(|c| c.is_ascii_digit()) {
                    return Err(bad(sc.pos));
                }
                set_date(&mut f, full_year(y, n), m, d);
                have_date = true;
                continue;
            }
            if run <= 2 {
                // "4 July 2017", "4th July 2017".
                let (d, _) = sc.digits(2).ok_or_else(|| bad(start))?;
                let suffix_at = sc.pos;
                let suffix = sc.word().to_ascii_lowercase();
                if !suffix.is_empty() && !matches!(suffix.as_str(), "st" | "nd" | "rd" | "th") {
                    sc.pos = suffix_at;
                }
                sc.skip_spaces();
                let _ = sc.eat(b'-') || sc.eat(b'.');
                let w = sc.word().to_string();
                let m = month_from_name(&w).ok_or_else(|| bad(start))?;
                sc.skip_spaces();
                let _ = sc.eat(b'-') || sc.eat(b'.') || sc.eat(b',');
                sc.skip_spaces();
                let y = sc.digits(4).map(|(v, n)| full_year(v, n));
                f.d = Some(d);
                f.m = Some(m);
                f.y = y;
                have_date = true;
                continue;
            }
            return Err(bad(start));
        }
        if c == b'+' || c == b'-' {
            if f.zone.is_some() {
                return Err(parse_error(input, start, "Double timezone specification"));
            }
            read_zone(&mut sc, input, &mut f)?;
            continue;
        }
        if c.is_ascii_alphabetic() {
            let w = sc.word().to_string();
            if !have_date && let Some(m) = month_from_name(&w) {
                // "July 4, 2017", "Jul 4 2017".
                sc.skip_spaces();
                let _ = sc.eat(b'-') || sc.eat(b'.');
                let (d, _) = sc.digits(2).ok_or_else(|| bad(sc.pos))?;
                let suffix_at = sc.pos;
                let suffix = sc.word().to_ascii_lowercase();
                if !suffix.is_empty() && !matches!(suffix.as_str(), "st" | "nd" | "rd" | "th") {
                    sc.pos = suffix_at;
                }
                f.m = Some(m);
                f.d = Some(d);
                have_date = true;
                continue;
            }
            // Weekday names are accepted and ignored when they agree with nothing else.
            let lower = w.to_ascii_lowercase();
            if parse_day_of_week(&lower).is_some() {
                continue;
            }
            sc.pos = start;
            if f.zone.is_some() {
                return Err(parse_error(input, start, "Double timezone specification"));
            }
            read_zone(&mut sc, input, &mut f)?;
            continue;
        }
        return Err(bad(start));
    }
    Ok(f)
}

/// A number for a format specifier: timelib's `timelib_get_nr` skips anything that is not a
/// digit before reading up to `max` digits.
fn format_number(sc: &mut Scanner<'_>, max: usize) -> Option<i64> {
    while sc.peek().is_some_and(|c| !c.is_ascii_digit()) {
        sc.pos += 1;
    }
    sc.digits(max).map(|(v, _)| v)
}

/// `timelib_parse_from_format` with MongoDB's specifiers.
fn parse_format_fields(input: &str, format: &str) -> Result<Fields> {
    let mut sc = Scanner {
        s: input.as_bytes(),
        pos: 0,
    };
    let mut f = Fields::default();
    let mut fmt = format.chars();
    while let Some(c) = fmt.next() {
        let start = sc.pos;
        if c != '%' {
            // A literal must match exactly.
            let mut buf = [0u8; 4];
            let lit = c.encode_utf8(&mut buf).as_bytes();
            if sc.s.get(sc.pos..sc.pos + lit.len()) != Some(lit) {
                return Err(parse_error(
                    input,
                    start,
                    "The format separator does not match",
                ));
            }
            sc.pos += lit.len();
            continue;
        }
        let Some(spec) = fmt.next() else {
            break;
        };
        let need = |v: Option<i64>, what: &str| v.ok_or_else(|| parse_error(input, start, what));
        match spec {
            '%' => {
                if !sc.eat(b'%') {
                    return Err(parse_error(
                        input,
                        start,
                        "The escaped character could not be found",
                    ));
                }
            }
            'Y' => {
                f.y = Some(need(
                    format_number(&mut sc, 4),
                    "A four digit year could not be found",
                )?)
            }
            'G' => {
                f.iso_year = Some(need(
                    format_number(&mut sc, 4),
                    "A four digit ISO year could not be found",
                )?)
            }
            'm' => {
                f.m = Some(need(
                    format_number(&mut sc, 2),
                    "A two digit month could not be found",
                )?)
            }
            'd' => {
                f.d = Some(need(
                    format_number(&mut sc, 2),
                    "A two digit day could not be found",
                )?)
            }
            'H' => {
                f.h = Some(need(
                    format_number(&mut sc, 2),
                    "A two digit hour could not be found",
                )?)
            }
            'M' => {
                f.i = Some(need(
                    format_number(&mut sc, 2),
                    "A two digit minute could not be found",
                )?)
            }
            'S' => {
                f.s = Some(need(
                    format_number(&mut sc, 2),
                    "A two digit second could not be found",
                )?)
            }
            'L' => {
                let ms = need(
                    format_number(&mut sc, 3),
                    "A three digit millisecond could not be found",
                )?;
                f.us = ms * 1000;
            }
            'j' => {
                f.doy = Some(need(
                    format_number(&mut sc, 3),
                    "A three digit day-of-year could not be found",
                )?)
            }
            'V' => {
                f.iso_week = Some(need(
                    format_number(&mut sc, 2),
                    "A two digit ISO week could not be found",
                )?)
            }
            'u' => {
                f.iso_day = Some(need(
                    format_number(&mut sc, 1),
                    "A single digit day of week could not be found",
                )?)
            }
            'U' => {
                f.week_u = Some(need(
                    format_number(&mut sc, 2),
                    "A two digit week could not be found",
                )?)
            }
            'w' => {
                f.weekday_w = Some(need(
                    format_number(&mut sc, 1),
                    "A single digit day of week could not be found",
                )?)
            }
            'b' | 'B' => {
                let w = sc.word().to_string();
                let m = month_from_name(&w)
                    .filter(|_| spec == 'B' || w.len() == 3)
                    .ok_or_else(|| {
                        parse_error(input, start, "A textual month could not be found")
                    })?;
                f.m = Some(m);
            }
            'z' => read_zone(&mut sc, input, &mut f)?,
            'Z' => {
                let negative = match sc.peek() {
                    Some(b'-') => {
                        sc.pos += 1;
                        true
                    }
                    Some(b'+') => {
                        sc.pos += 1;
                        false
                    }
                    _ => false,
                };
                let (v, _) = sc.digits(4).ok_or_else(|| {
                    parse_error(
                        input,
                        start,
                        "A timezone offset in minutes could not be found",
                    )
                })?;
                let secs = v * 60;
                f.zone = Some(StrZone::Offset(if negative { -secs } else { secs }));
            }
            _ => return Err(parse_error(input, start, "Unexpected data found.")),
        }
    }
    if !sc.eof() {
        return Err(parse_error(input, sc.pos, "Trailing data"));
    }
    // ISO week dates and day-of-year resolve to a calendar date.
    if f.iso_year.is_some() || f.iso_week.is_some() || f.iso_day.is_some() {
        let days = days_from_iso(
            f.iso_year.unwrap_or(1970),
            f.iso_week.unwrap_or(1),
            f.iso_day.unwrap_or(1),
        );
        let (y, m, d) = civil_from_days(days);
        set_date(&mut f, y, m, d);
    } else if let Some(doy) = f.doy {
        let y = f.y.ok_or_else(|| {
            parse_error(
                input,
                0,
                "A 'day of year' can only come after a year has been found",
            )
        })?;
        let (yy, m, d) = civil_from_days(days_from_civil(y, 1, 1) + doy - 1);
        set_date(&mut f, yy, m, d);
    }
    Ok(f)
}

/// `TimeZoneDatabase::fromString`: the fields are checked for completeness, a zone in the
/// string conflicts with a `timezone` argument other than UTC, and the local time is resolved
/// in the string's zone or `tz`.
fn finish(input: &str, mut f: Fields, tz: &Tz) -> Result<i64> {
    if f.h.is_none() && f.i.is_none() && f.s.is_none() {
        f.h = Some(0);
        f.i = Some(0);
        f.s = Some(0);
        f.us = 0;
    }
    let (Some(y), Some(m), Some(d), Some(h), Some(i), Some(s)) = (f.y, f.m, f.d, f.h, f.i, f.s)
    else {
        return Err(conversion(format!(
            "an incomplete date/time string has been found, with elements missing: \"{input}\""
        )));
    };
    if !tz.is_utc() {
        match &f.zone {
            None => {}
            Some(StrZone::Offset(_)) => {
                return Err(conversion(
                    "you cannot pass in a date/time string with GMT offset together with a \
                     timezone argument",
                ));
            }
            Some(StrZone::Abbr(a, _)) => {
                return Err(conversion(format!(
                    "you cannot pass in a date/time string with time zone information ('{a}') \
                     together with a timezone argument"
                )));
            }
        }
    }
    let zone = match &f.zone {
        Some(StrZone::Offset(o) | StrZone::Abbr(_, o)) => Tz::Offset(*o),
        None => tz.clone(),
    };
    Ok(zone.local_to_date(y, m, d, h, i, s, f.us / 1000))
}

/// `$dateFromString` without `format`.
pub(crate) fn parse_free(input: &str, tz: &Tz) -> Result<i64> {
    let f = parse_free_fields(input)?;
    finish(input, f, tz)
}

/// `$dateFromString` with a (validated) `format`.
pub(crate) fn parse_with_format(input: &str, format: &str, tz: &Tz) -> Result<i64> {
    let f = parse_format_fields(input, format)?;
    finish(input, f, tz)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        parse_free(s, &Tz::Utc).unwrap()
    }

    #[test]
    fn calendar_round_trip() {
        for days in [-1_000_000i64, -719_468, -1, 0, 1, 10_957, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(days_from_iso(2021, 1, 1), days_from_civil(2021, 1, 4));
        assert_eq!(days_from_iso(2020, 53, 7), days_from_civil(2021, 1, 3));
    }

    #[test]
    fn zones() {
        let ny = Tz::parse("America/New_York").unwrap();
        // 2021-03-14 02:30 does not exist in New York: it becomes 03:30 EDT.
        let gap = ny.local_to_date(2021, 3, 14, 2, 30, 0, 0);
        assert_eq!(gap, ms("2021-03-14T07:30:00Z"));
        // 2021-11-07 01:30 happens twice: the EDT one.
        let overlap = ny.local_to_date(2021, 11, 7, 1, 30, 0, 0);
        assert_eq!(overlap, ms("2021-11-07T05:30:00Z"));
        assert!(Tz::parse("america/new_york").is_err());
        assert!(Tz::parse("+5").is_err());
        assert!(matches!(Tz::parse("+05:30").unwrap(), Tz::Offset(19800)));
        assert!(matches!(Tz::parse("-0800").unwrap(), Tz::Offset(-28800)));
        // Canonical names, links of the `backward` file and Etc zones are all known.
        for name in [
            "Europe/Kyiv",
            "Europe/Kiev",
            "US/Eastern",
            "EST5EDT",
            "Etc/GMT+5",
            "GMT",
            "Asia/Kathmandu",
        ] {
            assert!(Tz::parse(name).is_ok(), "{name}");
        }
        let kathmandu = Tz::parse("Asia/Kathmandu").unwrap();
        assert_eq!(kathmandu.offset_at(0), 19800);
        assert_eq!(kathmandu.offset_at(1_600_000_000_000), 20700);
    }

    #[test]
    fn free_forms() {
        assert_eq!(ms("2017-02-08T12:10:40.787"), 1_486_555_840_787);
        assert_eq!(ms("2017-02-08"), 1_486_512_000_000);
        assert_eq!(ms("2017-02-08T12:10:40.787Z"), 1_486_555_840_787);
        assert_eq!(ms("2017-02-08T12:10:40.787+01:00"), 1_486_552_240_787);
        assert_eq!(ms("July 4, 2017"), ms("2017-07-04"));
        assert_eq!(ms("4 Jul 2017 10:00pm"), ms("2017-07-04T22:00:00"));
        assert_eq!(ms("07/04/2017"), ms("2017-07-04"));
        assert!(parse_free("20177-02-09T03:35:02.055", &Tz::Utc).is_err());
        assert!(parse_free("July 4", &Tz::Utc).is_err());
        assert!(parse_free("2017-02-08 Europe/London", &Tz::Utc).is_err());
    }
}
