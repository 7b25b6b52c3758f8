//! [`forward_store!`](crate::forward_store): a `Store` impl that hands every call to an
//! inner store, except the methods the wrapper writes itself.
//!
//! How it works, for whoever changes it. The contract's methods are listed once, in
//! [`__store_methods!`](crate::__store_methods) beside the trait. `forward_store!` reads
//! the wrapper's impl header, the inner store and the names of the methods the wrapper
//! writes, then walks that list: a method the wrapper writes is skipped, every other one
//! becomes a one-line call to the inner store. The walk is done by a small `macro_rules!`
//! it defines on the spot with one "skip" rule per written method, because `macro_rules!`
//! can only compare a name with one spelled out in a rule. Everything is expanded before
//! `#[async_trait]` sees the impl, which cannot expand macros inside it. The helper lives
//! in an anonymous `const _` block, so several wrappers in one module do not collide.

/// Implements [`Store`](crate::Store) for a wrapper by handing every call to an inner
/// store, except the methods the wrapper writes itself.
///
/// Write the impl as usual, with `#[async_trait]` left out (the macro adds it), and put
/// `forward self => <inner store>;` first in its body. The inner store is a place
/// expression of a type that implements `Store`: `self.inner`, `self.0`, `**self`. It
/// is written after `self =>` because a macro may only use the `self` it is handed. Then
/// write the methods the wrapper changes, exactly as in a hand-written impl; every other
/// method of the contract, the ones with a default such as
/// [`capabilities`](crate::Store::capabilities) included, is forwarded unchanged, so a
/// wrapper never falls back to a default by accident, and a method added to the
/// contract later reaches every wrapper without touching it.
///
/// The generated impl carries `#[deny(clippy::missing_trait_methods)]`; a method the
/// wrapper names that the contract does not have is a compile error.
///
/// A wrapper implements [`Store`](crate::Store) itself, not the groups of
/// [`contract`](crate::contract) that a store implements: it takes its callers' params
/// as they are and hands them on, and the store at the bottom validates them once (it
/// may wrap an `Arc<dyn Store>`, which has no group impls to call).
///
/// # Example
///
/// A store that counts claims and leaves everything else to the store it wraps:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// use tenure_core::{ClaimParams, Lease, Result, Store};
///
/// #[derive(Debug)]
/// struct Counted<S> {
///     inner: S,
///     claims: AtomicU64,
/// }
///
/// tenure_core::forward_store! {
///     /// Every call goes to `inner`; claims are counted first.
///     impl<S: Store> Store for Counted<S> {
///         forward self => self.inner;
///
///         async fn claim(&self, params: ClaimParams) -> Result<Vec<Lease>> {
///             self.claims.fetch_add(1, Ordering::Relaxed);
///             self.inner.claim(params).await
///         }
///     }
/// }
///
/// fn is_a_store<T: Store>() {}
/// is_a_store::<Counted<std::sync::Arc<dyn Store>>>();
/// ```
///
/// A method the contract does not have does not compile, so a misspelled override is
/// never silently replaced by forwarding:
///
/// ```compile_fail
/// use tenure_core::{ClaimParams, Lease, Result, Store};
///
/// #[derive(Debug)]
/// struct Typo<S>(S);
///
/// tenure_core::forward_store! {
///     impl<S: Store> Store for Typo<S> {
///         forward self => self.0;
///
///         async fn claims(&self, params: ClaimParams) -> Result<Vec<Lease>> {
///             self.0.claim(params).await
///         }
///     }
/// }
/// ```
#[macro_export]
macro_rules! forward_store {
    ($(#[$attr:meta])* impl $($rest:tt)*) => {
        $crate::__forward_store!(@header [$(#[$attr])*] [impl] $($rest)*);
    };
}

/// The machinery behind [`forward_store!`]; not part of the API.
#[doc(hidden)]
#[macro_export]
macro_rules! __forward_store {
    // Takes the impl header token by token until only the body is left.
    (@header $attrs:tt [$($head:tt)*]
        { forward $self:ident => $inner:expr; $($items:tt)* }) => {
        $crate::__forward_store!(
            @names $attrs [$($head)*] [$self $inner] [] [$($items)*] $($items)*
        );
    };
    (@header $attrs:tt [$($head:tt)*] $next:tt $($rest:tt)*) => {
        $crate::__forward_store!(@header $attrs [$($head)* $next] $($rest)*);
    };

    // Collects the names of the methods the wrapper writes.
    (@names $attrs:tt $head:tt $to:tt [$($names:ident)*] $items:tt
        $(#[$m:meta])* $(async)? fn $name:ident $args:tt -> $ret:ty $body:block
        $($rest:tt)*) => {
        $crate::__forward_store!(@names $attrs $head $to [$($names)* $name] $items $($rest)*);
    };
    (@names $attrs:tt $head:tt $to:tt $names:tt $items:tt) => {
        $crate::__store_methods!($crate::__forward_store { @walk ($) $attrs $head $to $names $items });
    };

    // Walks the contract's methods, skipping the written ones, and emits the impl.
    // `$d` is a `$` for the rules of the helper macro defined here.
    (@walk ($d:tt) [$($attr:tt)*] [$($head:tt)*] [$self:ident $inner:expr]
        [$($name:ident)*] [$($items:tt)*] [$($method:tt)*]) => {
        const _: () = {
            macro_rules! __walk {
                $(
                    ([$d($d done:tt)*] [$d kind:tt $name $d($d sig:tt)*] $d($d rest:tt)*) => {
                        __walk!([$d($d done)*] $d($d rest)*);
                    };
                )*
                ([$d($d done:tt)*]
                    [fn $d m:ident ($d($d a:ident: $d t:ty),*) -> $d r:ty] $d($d rest:tt)*) => {
                    __walk!([$d($d done)*
                        fn $d m(&$self $d(, $d a: $d t)*) -> $d r {
                            $crate::Store::$d m(&$inner $d(, $d a)*)
                        }
                    ] $d($d rest)*);
                };
                ([$d($d done:tt)*]
                    [async $d m:ident ($d($d a:ident: $d t:ty),*) -> $d r:ty] $d($d rest:tt)*) => {
                    __walk!([$d($d done)*
                        async fn $d m(&$self $d(, $d a: $d t)*) -> $d r {
                            $crate::Store::$d m(&$inner $d(, $d a)*).await
                        }
                    ] $d($d rest)*);
                };
                ([$d($d done:tt)*]) => {
                    $($attr)*
                    #[$crate::async_trait]
                    #[deny(clippy::missing_trait_methods)]
                    $($head)* {
                        $d($d done)*
                        $($items)*
                    }
                };
            }
            __walk!([] $($method)*);
        };
    };
}
