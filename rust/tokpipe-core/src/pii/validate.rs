//! Checksums and range rules that turn a pattern match into a detection: Luhn and IIN ranges
//! for payment cards, ISO 7064 MOD 97-10 for IBANs, ISO 7064 MOD 11-2 and the birth date for
//! China resident IDs, the SSA's invalid ranges for US SSNs, and which IP addresses are public.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Luhn (ISO/IEC 7812-1 annex B) over ASCII digits; false on anything else.
pub fn luhn(digits: &[u8]) -> bool {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let mut sum = 0u32;
    for (i, &b) in digits.iter().rev().enumerate() {
        let mut d = (b - b'0') as u32;
        if i % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    sum % 10 == 0
}

/// Whether `digits` (13 to 19 ASCII digits) start with an issuer prefix of a major network at
/// a length that network issues: Visa, Mastercard, American Express, Discover, JCB, Diners
/// Club, UnionPay and Maestro.
pub fn card_iin(digits: &[u8]) -> bool {
    let n = digits.len();
    let prefix = |k: usize| -> u32 {
        digits[..k]
            .iter()
            .fold(0u32, |acc, &b| acc * 10 + (b - b'0') as u32)
    };
    if !(13..=19).contains(&n) {
        return false;
    }
    let p1 = prefix(1);
    let p2 = prefix(2);
    let p3 = prefix(3);
    let p4 = prefix(4);
    let p6 = prefix(6);
    match () {
        // Visa
        _ if p1 == 4 && matches!(n, 13 | 16 | 19) => true,
        // Mastercard: 51-55 and 2221-2720
        _ if (51..=55).contains(&p2) && n == 16 => true,
        _ if (2221..=2720).contains(&p4) && n == 16 => true,
        // American Express
        _ if (p2 == 34 || p2 == 37) && n == 15 => true,
        // Discover: 6011, 644-649, 65, 622126-622925
        _ if (p4 == 6011
            || (644..=649).contains(&p3)
            || p2 == 65
            || (622126..=622925).contains(&p6))
            && (16..=19).contains(&n) =>
        {
            true
        }
        // JCB
        _ if (3528..=3589).contains(&p4) && (16..=19).contains(&n) => true,
        // Diners Club: 300-305, 36, 38-39
        _ if ((300..=305).contains(&p3) || p2 == 36 || p2 == 38 || p2 == 39)
            && (14..=19).contains(&n) =>
        {
            true
        }
        // UnionPay
        _ if p2 == 62 && (16..=19).contains(&n) => true,
        // Maestro: 50, 56-58, 6 (the remaining 6x)
        _ if (p2 == 50 || (56..=58).contains(&p2) || p1 == 6) && (13..=19).contains(&n) => true,
        _ => false,
    }
}

/// IBAN lengths by country (SWIFT IBAN registry).
const IBAN_LENGTHS: &[(&[u8; 2], usize)] = &[
    (b"AD", 24),
    (b"AE", 23),
    (b"AL", 28),
    (b"AT", 20),
    (b"AZ", 28),
    (b"BA", 20),
    (b"BE", 16),
    (b"BG", 22),
    (b"BH", 22),
    (b"BI", 27),
    (b"BR", 29),
    (b"BY", 28),
    (b"CH", 21),
    (b"CR", 22),
    (b"CY", 28),
    (b"CZ", 24),
    (b"DE", 22),
    (b"DJ", 27),
    (b"DK", 18),
    (b"DO", 28),
    (b"EE", 20),
    (b"EG", 29),
    (b"ES", 24),
    (b"FI", 18),
    (b"FK", 18),
    (b"FO", 18),
    (b"FR", 27),
    (b"GB", 22),
    (b"GE", 22),
    (b"GI", 23),
    (b"GL", 18),
    (b"GR", 27),
    (b"GT", 28),
    (b"HR", 21),
    (b"HU", 28),
    (b"IE", 22),
    (b"IL", 23),
    (b"IQ", 23),
    (b"IS", 26),
    (b"IT", 27),
    (b"JO", 30),
    (b"KW", 30),
    (b"KZ", 20),
    (b"LB", 28),
    (b"LC", 32),
    (b"LI", 21),
    (b"LT", 20),
    (b"LU", 20),
    (b"LV", 21),
    (b"LY", 25),
    (b"MC", 27),
    (b"MD", 24),
    (b"ME", 22),
    (b"MK", 19),
    (b"MN", 20),
    (b"MR", 27),
    (b"MT", 31),
    (b"MU", 30),
    (b"NI", 28),
    (b"NL", 18),
    (b"NO", 15),
    (b"OM", 23),
    (b"PK", 24),
    (b"PL", 28),
    (b"PS", 29),
    (b"PT", 25),
    (b"QA", 29),
    (b"RO", 24),
    (b"RS", 22),
    (b"RU", 33),
    (b"SA", 24),
    (b"SC", 31),
    (b"SD", 18),
    (b"SE", 24),
    (b"SI", 19),
    (b"SK", 24),
    (b"SM", 27),
    (b"SO", 23),
    (b"ST", 25),
    (b"SV", 28),
    (b"TL", 23),
    (b"TN", 24),
    (b"TR", 26),
    (b"UA", 29),
    (b"VA", 22),
    (b"VG", 24),
    (b"XK", 20),
    (b"YE", 30),
];

/// The IBAN length of a country code, if it has IBANs.
pub fn iban_length(country: &[u8]) -> Option<usize> {
    IBAN_LENGTHS
        .iter()
        .find(|(c, _)| c.as_slice() == country)
        .map(|&(_, n)| n)
}

/// ISO 13616 check: `iban` (upper-case letters and digits, no spaces) has its country's length
/// and the number formed by moving the first four characters to the end, letters as 10..35,
/// is 1 mod 97.
pub fn iban_valid(iban: &[u8]) -> bool {
    if iban.len() < 5 || iban_length(&iban[..2]) != Some(iban.len()) {
        return false;
    }
    if !iban[2].is_ascii_digit() || !iban[3].is_ascii_digit() {
        return false;
    }
    let mut rem = 0u32;
    for &b in iban[4..].iter().chain(&iban[..4]) {
        match b {
            b'0'..=b'9' => rem = (rem * 10 + (b - b'0') as u32) % 97,
            b'A'..=b'Z' => rem = (rem * 100 + (b - b'A' + 10) as u32) % 97,
            _ => return false,
        }
    }
    rem == 1
}

/// The ISO 7064 MOD 11-2 check character of the first 17 digits of a China resident ID
/// (GB 11643-1999): weights 2^(17-i) mod 11, check = (12 - sum mod 11) mod 11, 10 written X.
pub fn china_id_check(first17: &[u8]) -> Option<u8> {
    if first17.len() != 17 || !first17.iter().all(u8::is_ascii_digit) {
        return None;
    }
    const W: [u32; 17] = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
    let sum: u32 = first17
        .iter()
        .zip(W)
        .map(|(&b, w)| (b - b'0') as u32 * w)
        .sum();
    let c = (12 - sum % 11) % 11;
    Some(if c == 10 { b'X' } else { b'0' + c as u8 })
}

fn is_leap(y: u32) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// A valid calendar date with a year from 1900 to 2099.
pub fn valid_date(y: u32, m: u32, d: u32) -> bool {
    if !(1900..=2099).contains(&y) || !(1..=12).contains(&m) || d == 0 {
        return false;
    }
    let days = match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    d <= days
}

fn num(b: &[u8]) -> u32 {
    b.iter().fold(0, |acc, &c| acc * 10 + (c - b'0') as u32)
}

/// An 18-character China resident ID: a province code 11-82, a valid birth date
/// (YYYYMMDD at 6..14) and the MOD 11-2 check character (`X` or `x` for 10).
pub fn china_id_valid(id: &[u8]) -> bool {
    if id.len() != 18 || !id[..17].iter().all(u8::is_ascii_digit) {
        return false;
    }
    let province = num(&id[..2]);
    if !(11..=82).contains(&province) {
        return false;
    }
    if !valid_date(num(&id[6..10]), num(&id[10..12]), num(&id[12..14])) {
        return false;
    }
    china_id_check(&id[..17]) == Some(id[17].to_ascii_uppercase())
}

/// A US SSN's three digit groups (3, 2, 4 digits): never area 000, 666 or 900-999, group 00 or
/// serial 0000 (SSA, "Social Security Number Randomization").
pub fn ssn_valid(area: &[u8], group: &[u8], serial: &[u8]) -> bool {
    let (a, g, s) = (num(area), num(group), num(serial));
    a != 0 && a != 666 && a < 900 && g != 0 && s != 0
}

/// An IPv4 address on the public internet: not private, loopback, link-local, shared
/// (100.64/10), documentation, benchmarking (198.18/15), multicast, reserved (240/4),
/// broadcast or "this network" (0/8).
pub fn ipv4_public(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_documentation()
        || ip.is_multicast()
        || ip.is_broadcast()
        || o[0] == 0
        || o[0] >= 240
        || (o[0] == 100 && (64..128).contains(&o[1]))
        || (o[0] == 198 && (o[1] == 18 || o[1] == 19))
        || (o[0] == 192 && o[1] == 0 && o[2] == 0))
}

/// An IPv6 address on the public internet: not unspecified, loopback, unique local (fc00::/7),
/// link-local (fe80::/10), documentation (2001:db8::/32) or multicast; IPv4-mapped addresses
/// are judged by their IPv4 address.
pub fn ipv6_public(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return ipv4_public(v4);
    }
    let s = ip.segments();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] == 0x2001 && s[1] == 0x0db8)
        || (s[0] & 0xff00) == 0xff00)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luhn_published_test_cards() {
        // Test card numbers published by the card networks / payment processors.
        for card in [
            "4111111111111111", // Visa
            "4012888888881881", // Visa
            "5555555555554444", // Mastercard
            "5105105105105100", // Mastercard
            "2223003122003222", // Mastercard 2-series
            "378282246310005",  // American Express
            "371449635398431",  // American Express
            "6011111111111117", // Discover
            "3530111333300000", // JCB
            "30569309025904",   // Diners Club
            "6200000000000005", // UnionPay
        ] {
            assert!(luhn(card.as_bytes()), "{card}");
            assert!(card_iin(card.as_bytes()), "{card}");
        }
        assert!(!luhn(b"4111111111111112"));
        assert!(!luhn(b"1234567812345678"));
        assert!(!card_iin(b"9780306406157")); // an ISBN-13
    }

    #[test]
    fn iban_registry_examples() {
        // Examples from the SWIFT IBAN registry.
        for iban in [
            "GB82WEST12345698765432",
            "DE89370400440532013000",
            "FR1420041010050500013M02606",
            "NL91ABNA0417164300",
            "BE68539007547034",
            "CH9300762011623852957",
            "NO9386011117947",
        ] {
            assert!(iban_valid(iban.as_bytes()), "{iban}");
        }
        assert!(!iban_valid(b"GB82WEST12345698765431"));
        assert!(!iban_valid(b"GB82WEST1234569876543")); // wrong length
        assert!(!iban_valid(b"XX82WEST12345698765432"));
    }

    #[test]
    fn china_id_checksum() {
        // Check characters computed independently from the published ISO 7064 MOD 11-2
        // algorithm (Python: sum(int(c) * pow(2, 17 - i, 11) ...)): the GB 11643-1999 example
        // 11010519491231002X, and 440524188001010014.
        assert_eq!(china_id_check(b"11010519491231002"), Some(b'X'));
        assert_eq!(china_id_check(b"44052418800101001"), Some(b'4'));
        assert!(china_id_valid(b"11010519491231002X"));
        assert!(china_id_valid(b"11010519491231002x"));
        assert!(!china_id_valid(b"110105194912310021")); // wrong check
        assert!(!china_id_valid(b"110105194913310027")); // month 13
    }

    #[test]
    fn ssn_ranges() {
        assert!(ssn_valid(b"123", b"45", b"6789"));
        assert!(!ssn_valid(b"000", b"45", b"6789"));
        assert!(!ssn_valid(b"666", b"45", b"6789"));
        assert!(!ssn_valid(b"900", b"45", b"6789"));
        assert!(!ssn_valid(b"123", b"00", b"6789"));
        assert!(!ssn_valid(b"123", b"45", b"0000"));
    }

    #[test]
    fn public_addresses() {
        assert!(ipv4_public("8.8.8.8".parse().unwrap()));
        assert!(!ipv4_public("10.1.2.3".parse().unwrap()));
        assert!(!ipv4_public("192.168.0.1".parse().unwrap()));
        assert!(!ipv4_public("127.0.0.1".parse().unwrap()));
        assert!(!ipv4_public("100.64.0.1".parse().unwrap()));
        assert!(ipv6_public("2606:4700:4700::1111".parse().unwrap()));
        assert!(!ipv6_public("fe80::1".parse().unwrap()));
        assert!(!ipv6_public("2001:db8::1".parse().unwrap()));
        assert!(!ipv6_public("::ffff:10.0.0.1".parse().unwrap()));
    }
}
