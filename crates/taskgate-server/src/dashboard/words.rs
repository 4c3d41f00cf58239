//! The services' errors in the dashboard's words, in one place. A storage
//! failure is not worded here: it gets the dashboard's error page
//! (`session::store_error`), like every other.

use taskgate_core::Micros;

use crate::service::accounts::{self, AccountError};
use crate::service::calls::CallError;
use crate::service::keys::{self, KeyError};
use crate::service::sessions::SessionError;
use crate::service::users::UserError;
use crate::service::webhooks::{self, WebhookError};

/// What the page says of `e`, or `Err` with the store's error for the
/// error page.
pub fn account_error(e: AccountError) -> Result<String, taskgate_store::StoreError> {
    Ok(match e {
        AccountError::BadName => format!(
            "The name must be 1 to {} characters.",
            accounts::NAME_MAX_CHARS
        ),
        AccountError::UnknownPlan { plan, .. } => format!("There is no plan {plan:?}."),
        AccountError::AboveCeiling { ceiling_micros } => format!(
            "The spend limit can be at most ${} per month, the ceiling the operator set \
             for this account.",
            Micros(ceiling_micros).to_usd_string()
        ),
        AccountError::CeilingHoldsALimit { ceiling_micros } => format!(
            "The operator has set a ceiling of ${} per month on this account's spend \
             limit, so it cannot be removed. Set an amount up to ${}.",
            Micros(ceiling_micros).to_usd_string(),
            Micros(ceiling_micros).to_usd_string()
        ),
        AccountError::NothingToChange => "Nothing was changed.".to_owned(),
        AccountError::NotFound(_) => "There is no such account.".to_owned(),
        AccountError::Forbidden => "Only admins can do this.".to_owned(),
        AccountError::Key(e) => return key_error(e),
        AccountError::Store(e) => return Err(e),
    })
}

pub fn key_error(e: KeyError) -> Result<String, taskgate_store::StoreError> {
    Ok(match e {
        KeyError::AccountNotFound(_) | KeyError::NotFound(_) => "There is no such key.".to_owned(),
        KeyError::BadName => format!(
            "A key needs a name of 1 to {} characters.",
            keys::NAME_MAX_CHARS
        ),
        KeyError::ScopesNeeded => "Choose at least one scope for a custom key.".to_owned(),
        KeyError::ScopesNotRestricted | KeyError::ApisNotRestricted => {
            "Scopes and APIs are chosen for custom keys only.".to_owned()
        }
        KeyError::ApisEmpty => "Choose at least one API, or none to allow all.".to_owned(),
        KeyError::BadLifetime => "Choose when the key expires.".to_owned(),
        KeyError::Revoked(_) => "This key is revoked; create a new key instead.".to_owned(),
        KeyError::Expired(_) => "This key has expired; create a new key instead.".to_owned(),
        KeyError::Forbidden => "Only the account's owners can change its keys.".to_owned(),
        KeyError::Store(e) => return Err(e),
    })
}

pub fn webhook_error(e: WebhookError) -> Result<String, taskgate_store::StoreError> {
    Ok(match e {
        WebhookError::EndpointNotFound(_) => "There is no such webhook endpoint.".to_owned(),
        WebhookError::DeliveryNotFound(_) => "There is no such delivery.".to_owned(),
        // The service words a URL's refusal for people already ("The URL
        // must be an http or https URL").
        WebhookError::InvalidUrl { message } => format!("{message}."),
        WebhookError::InvalidEvents { .. } => "Choose at least one event.".to_owned(),
        WebhookError::DescriptionTooLong => format!(
            "The description can be at most {} characters.",
            webhooks::MAX_DESCRIPTION_LEN
        ),
        WebhookError::TooManyEndpoints => format!(
            "This account has {} endpoints of this mode already, the most it may have: \
             delete one to add another.",
            webhooks::MAX_ENDPOINTS
        ),
        WebhookError::Store(e) => return Err(e),
    })
}

pub fn user_error(e: UserError) -> Result<String, taskgate_store::StoreError> {
    Ok(match e {
        UserError::AccountNotFound(_) => "There is no such account.".to_owned(),
        UserError::NotFound => "There is no such user.".to_owned(),
        UserError::EmailTaken(email) => format!("A user with email {email} exists."),
        UserError::WeakPassword(problem) => problem,
        UserError::BadEmail(problem) => problem,
        UserError::DisablingSelf => "You cannot disable yourself.".to_owned(),
        UserError::Forbidden => "Only admins can do this.".to_owned(),
        UserError::Store(e) => return Err(e),
    })
}

/// The sign-in page's refusals (and a session's lookup or end, which only
/// the store fails).
pub fn sign_in_error(e: SessionError) -> Result<String, taskgate_store::StoreError> {
    Ok(match e {
        SessionError::TooManyFailures { retry_after_secs } => {
            format!("Too many failed sign-ins. Try again in {retry_after_secs} seconds.")
        }
        SessionError::Busy => "Too many sign-ins at once. Try again in a moment.".to_owned(),
        SessionError::Store(e) => return Err(e),
        // What a sign-in is never refused for says no more than a wrong
        // password.
        SessionError::WrongCredentials
        | SessionError::WrongCurrentPassword
        | SessionError::WeakPassword(_)
        | SessionError::Forbidden
        | SessionError::UserNotFound => "Email or password is wrong.".to_owned(),
    })
}

/// The password page's refusals.
pub fn password_change_error(e: SessionError) -> Result<String, taskgate_store::StoreError> {
    Ok(match e {
        SessionError::WrongCurrentPassword | SessionError::WrongCredentials => {
            "The current password is wrong.".to_owned()
        }
        SessionError::WeakPassword(problem) => problem,
        SessionError::TooManyFailures { retry_after_secs } => {
            format!("Too many wrong passwords. Try again in {retry_after_secs} seconds.")
        }
        SessionError::Busy => "Too many password checks at once. Try again in a moment.".to_owned(),
        SessionError::Forbidden | SessionError::UserNotFound => {
            "Only a signed-in user changes their password.".to_owned()
        }
        SessionError::Store(e) => return Err(e),
    })
}

/// Try it's errors: the call's own problems as the service words them (the
/// input's, with every violation), the rest in the dashboard's words.
pub fn call_error(e: CallError) -> Result<String, taskgate_store::StoreError> {
    Ok(match e {
        CallError::InvalidInput {
            message,
            violations,
            ..
        } => {
            let mut text = message;
            for v in violations {
                text.push_str(&format!(" {}: {}.", v.path, v.message));
            }
            text
        }
        CallError::InvalidField { message, .. }
        | CallError::OptionNotAllowed { message, .. }
        | CallError::Unsupported { message, .. } => message,
        CallError::NotPermitted(_) => "This API cannot be tried from this account.".to_owned(),
        CallError::UnknownApi(api) => format!("There is no API {api:?}."),
        CallError::SpendLimitReached { .. } => {
            "The account has reached its monthly spend limit.".to_owned()
        }
        CallError::IdempotencyInProgress | CallError::IdempotencyKeyReused => {
            "The same request is being answered; try again shortly.".to_owned()
        }
        CallError::TaskLost => {
            "The task was lost to a storage failure; try again shortly.".to_owned()
        }
        CallError::Stopped => "The call stopped unexpectedly; try again.".to_owned(),
        CallError::Busy => "Taskgate is busy; try again.".to_owned(),
        CallError::Store(e) => return Err(e),
    })
}
