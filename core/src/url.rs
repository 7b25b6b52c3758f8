//! The pieces of a store URL every store reads the same way: its scheme, matched
//! without regard to case (RFC 3986), and the store's own query parameters
//! (`tenure_schema`, `tenure_prefix`), taken out before the rest goes to the driver.

use crate::{Error, Result};

/// The scheme of `url` in lowercase, and the URL with its scheme so written (the rest
/// as given); `None` when `url` has no `:`.
///
/// ```
/// let (scheme, url) = tenure_core::url_scheme("SQLite://Data/W.db").unwrap();
/// assert_eq!((scheme.as_str(), url.as_str()), ("sqlite", "sqlite://Data/W.db"));
/// ```
pub fn url_scheme(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once(':')?;
    let scheme = scheme.to_ascii_lowercase();
    let url = format!("{scheme}:{rest}");
    Some((scheme, url))
}

/// `url` with its scheme in lowercase, when that scheme is one of `schemes` (a store's
/// `URL_SCHEMES`).
///
/// # Errors
/// [`Error::InvalidInput`] naming `url`, listing the schemes, for any other scheme.
///
/// ```
/// let url = tenure_core::url_in_schemes("Postgres://h/db", &["postgres", "postgresql"])?;
/// assert_eq!(url, "postgres://h/db");
/// let err = tenure_core::url_in_schemes("mysql://h/db", &["postgres", "postgresql"]).unwrap_err();
/// assert!(err.to_string().contains("does not start with postgres:// or postgresql://"));
/// # Ok::<(), tenure_core::Error>(())
/// ```
pub fn url_in_schemes(url: &str, schemes: &[&str]) -> Result<String> {
    match url_scheme(url) {
        Some((scheme, url)) if schemes.contains(&scheme.as_str()) => Ok(url),
        _ => {
            let mut names: Vec<String> = schemes.iter().map(|s| format!("{s}://")).collect();
            let last = names.pop().unwrap_or_default();
            let list = if names.is_empty() {
                last
            } else {
                format!("{} or {last}", names.join(", "))
            };
            Err(Error::invalid(
                "url",
                format!("{url:?} does not start with {list}"),
            ))
        }
    }
}

/// Takes the query parameter `name` out of `url`: the URL without it (for the driver)
/// and its value, if given.
///
/// # Errors
/// [`Error::InvalidInput`] naming `name` when the parameter is given twice or without
/// `=value`.
///
/// ```
/// let (rest, schema) =
///     tenure_core::take_url_param("postgres://h/db?sslmode=disable&tenure_schema=jobs", "tenure_schema")?;
/// assert_eq!(rest, "postgres://h/db?sslmode=disable");
/// assert_eq!(schema.as_deref(), Some("jobs"));
/// # Ok::<(), tenure_core::Error>(())
/// ```
pub fn take_url_param(url: &str, name: &'static str) -> Result<(String, Option<String>)> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), None));
    };
    let mut found = None;
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((key, value)) if key == name => {
                if found.replace(value.to_owned()).is_some() {
                    return Err(Error::invalid(name, "is given twice in the URL"));
                }
            }
            None if pair == name => {
                return Err(Error::invalid(
                    name,
                    "is given without a value (name=value)",
                ));
            }
            _ => rest.push(pair),
        }
    }
    let driver_url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok((driver_url, found))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_is_lowercased_and_the_rest_kept_as_written() {
        assert_eq!(
            url_scheme("Redis+Cluster://H:1?X=Y"),
            Some((
                "redis+cluster".to_owned(),
                "redis+cluster://H:1?X=Y".to_owned()
            ))
        );
        assert_eq!(
            url_scheme("memory:"),
            Some(("memory".to_owned(), "memory:".to_owned()))
        );
        assert_eq!(url_scheme("no-scheme"), None);
    }

    #[test]
    fn a_parameter_is_taken_out_leaving_the_others_in_order() {
        let (u, v) = take_url_param("x://h/db?a=1&p=v&b=2", "p").unwrap();
        assert_eq!((u.as_str(), v.as_deref()), ("x://h/db?a=1&b=2", Some("v")));
        let (u, v) = take_url_param("x://h/db?p=v", "p").unwrap();
        assert_eq!((u.as_str(), v.as_deref()), ("x://h/db", Some("v")));
        let (u, v) = take_url_param("x://h/db?pp=v", "p").unwrap();
        assert_eq!((u.as_str(), v), ("x://h/db?pp=v", None));
        let (u, v) = take_url_param("x://h/db", "p").unwrap();
        assert_eq!((u.as_str(), v), ("x://h/db", None));
    }

    #[test]
    fn a_parameter_given_twice_or_without_a_value_is_refused_naming_it() {
        for bad in ["x://h?p=a&p=b", "x://h?p", "x://h?a=1&p&b=2"] {
            let e = take_url_param(bad, "p").unwrap_err();
            assert_eq!(e.invalid_field(), Some("p"), "{bad}");
        }
    }
}
