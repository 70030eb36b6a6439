//! Pure UI state: the route parsed from the URL's hash. No signals, no web-sys, so it is tested
//! natively; anything a visitor can type into the address bar goes through here and never panics.

use std::fmt;

/// The top-level pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Page {
    Sandbox,
    Rack,
    Labs,
}

impl Page {
    pub const ALL: [Page; 3] = [Page::Sandbox, Page::Rack, Page::Labs];

    pub fn slug(self) -> &'static str {
        match self {
            Page::Sandbox => "sandbox",
            Page::Rack => "rack",
            Page::Labs => "labs",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Page::Sandbox => "Sandbox",
            Page::Rack => "Rack",
            Page::Labs => "Labs",
        }
    }
}

/// The views that can be embedded alone in an iframe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbedView {
    RackSummary,
    Pareto,
    Waterfall,
    KernelTimeline,
    SandboxMini,
    Lab,
}

impl EmbedView {
    pub const ALL: [EmbedView; 6] = [
        EmbedView::RackSummary,
        EmbedView::Pareto,
        EmbedView::Waterfall,
        EmbedView::KernelTimeline,
        EmbedView::SandboxMini,
        EmbedView::Lab,
    ];

    pub fn slug(self) -> &'static str {
        match self {
            EmbedView::RackSummary => "rack-summary",
            EmbedView::Pareto => "pareto",
            EmbedView::Waterfall => "waterfall",
            EmbedView::KernelTimeline => "kernel-timeline",
            EmbedView::SandboxMini => "sandbox-mini",
            EmbedView::Lab => "lab",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Page(Page),
    /// `#/embed/<view>?<state>`; the state string is parsed by the view itself.
    Embed {
        view: EmbedView,
        state: String,
    },
}

/// Why an address is not a MoEscope route; shown to the visitor as is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteError {
    UnknownPage(String),
    MissingEmbedView,
    UnknownEmbedView(String),
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pages: Vec<&str> = Page::ALL.iter().map(|p| p.slug()).collect();
        let views: Vec<&str> = EmbedView::ALL.iter().map(|v| v.slug()).collect();
        match self {
            RouteError::UnknownPage(p) => write!(
                f,
                "There is no page \u{201c}{}\u{201d}. Pages: {}.",
                shorten(p),
                pages.join(", ")
            ),
            RouteError::MissingEmbedView => {
                write!(
                    f,
                    "An embed address needs a view: #/embed/VIEW, with VIEW one of {}.",
                    views.join(", ")
                )
            }
            RouteError::UnknownEmbedView(v) => write!(
                f,
                "There is no embeddable view \u{201c}{}\u{201d}. Views: {}.",
                shorten(v),
                views.join(", ")
            ),
        }
    }
}

/// Keeps error messages readable when someone pastes a megabyte into the URL.
pub(crate) fn shorten(s: &str) -> String {
    shorten_to(s, 60)
}

/// At most `max` characters of `s`, with an ellipsis when cut.
pub(crate) fn shorten_to(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let head: String = s.chars().take(max).collect();
        format!("{head}\u{2026}")
    }
}

/// Parses `location.hash` (with or without the leading `#`). The empty hash is the sandbox.
pub fn parse_route(hash: &str) -> Result<Route, RouteError> {
    let hash = hash.strip_prefix('#').unwrap_or(hash);
    let hash = hash.strip_prefix('/').unwrap_or(hash);
    let (path, query) = hash.split_once('?').unwrap_or((hash, ""));
    let mut segments = path.split('/').filter(|s| !s.is_empty());
    match segments.next() {
        None => Ok(Route::Page(Page::Sandbox)),
        Some("embed") => {
            let view = segments.next().ok_or(RouteError::MissingEmbedView)?;
            let view = EmbedView::ALL
                .into_iter()
                .find(|v| v.slug() == view)
                .ok_or_else(|| RouteError::UnknownEmbedView(view.to_owned()))?;
            Ok(Route::Embed {
                view,
                state: query.to_owned(),
            })
        }
        Some(slug) => Page::ALL
            .into_iter()
            .find(|p| p.slug() == slug)
            .map(Route::Page)
            .ok_or_else(|| RouteError::UnknownPage(path.to_owned())),
    }
}

/// A page's link and a sandboxed `<iframe>` of one of its views, both with `query` as their
/// state: `{base}#/{page}?{query}` and `{base}#/embed/{view}?{query}`. The snippet is pasted into
/// other people's HTML, so its attribute values are escaped.
pub fn share_links(
    base: &str,
    (page, view): (Page, EmbedView),
    query: &str,
    (width, height): (u32, u32),
    title: &str,
) -> (String, String) {
    let link = format!("{base}#/{}?{query}", page.slug());
    let src = format!("{base}#/embed/{}?{query}", view.slug());
    let embed = format!(
        "<iframe src=\"{}\" width=\"{width}\" height=\"{height}\" title=\"{}\" sandbox=\"allow-scripts\" loading=\"lazy\"></iframe>",
        escape_attribute(&src),
        escape_attribute(title)
    );
    (link, embed)
}

/// Escapes a value for a double-quoted HTML attribute.
pub fn escape_attribute(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_root_hashes_are_the_sandbox() {
        for h in ["", "#", "#/", "/"] {
            assert_eq!(parse_route(h), Ok(Route::Page(Page::Sandbox)), "{h:?}");
        }
    }

    #[test]
    fn pages_parse_by_slug() {
        assert_eq!(parse_route("#/rack"), Ok(Route::Page(Page::Rack)));
        assert_eq!(parse_route("#/labs/"), Ok(Route::Page(Page::Labs)));
        assert_eq!(parse_route("#/sandbox?x=1"), Ok(Route::Page(Page::Sandbox)));
    }

    #[test]
    fn embed_keeps_its_state_string() {
        assert_eq!(
            parse_route("#/embed/pareto?v=1&system=gb200-nvl72"),
            Ok(Route::Embed {
                view: EmbedView::Pareto,
                state: "v=1&system=gb200-nvl72".into()
            })
        );
    }

    #[test]
    fn bad_routes_are_errors_with_the_name() {
        assert_eq!(
            parse_route("#/nope"),
            Err(RouteError::UnknownPage("nope".into()))
        );
        assert_eq!(parse_route("#/embed"), Err(RouteError::MissingEmbedView));
        assert_eq!(
            parse_route("#/embed/zzz"),
            Err(RouteError::UnknownEmbedView("zzz".into()))
        );
    }

    #[test]
    fn hostile_input_gives_a_short_message() {
        let long = format!("#/{}", "é%00<script>".repeat(10_000));
        let err = parse_route(&long).expect_err("not a page");
        assert!(err.to_string().chars().count() < 200);
    }
}
