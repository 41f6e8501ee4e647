"""What the browser tests do on a Streamlit page, each as a user would: act on a settled page, then wait until the
server has taken the action. Streamlit may drop what a page is given while its script reruns (an upload, once a
typed number), so every helper waits for the script's own state first and checks that the action held."""
from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError, TimeoutError as PlaywrightTimeout

#: The root element's mark of the script's state: "running" while it reruns, "notRunning" once it is done.
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
RUNNING = "[data-testid='stApp'][data-test-script-state='running']"


def text_at_button(label: str) -> str:
    """A `page.wait_for_function` script: the page's whole text at the moment a button labelled `label` is first
    drawn (null until then). One snapshot in one call, so no rerun can change the page between the two reads."""
    return ("() => { const button = [...document.querySelectorAll('button')].find(b => b.innerText.trim() === "
            f"{json.dumps(label)}); return button ? document.body.innerText : null; }}")


def wait_for_rerun(page, pause_ms: int = 300) -> None:
    """Until the page's script has finished. The pause first lets a rerun asked for just now begin (Streamlit's own
    browser tests wait the same way)."""
    page.wait_for_timeout(pause_ms)
    page.locator(IDLE).wait_for(state="attached", timeout=120_000)


def wait_for_run(page, start_s: float = 5.0) -> None:
    """Until the rerun an action just asked for has begun and ended: its start is awaited for up to `start_s` (a run
    too short to be seen, or never asked for, costs that wait), then its end (`wait_for_rerun`)."""
    try:
        page.locator(RUNNING).wait_for(state="attached", timeout=start_s * 1000)
    except PlaywrightTimeout:
        pass
    wait_for_rerun(page, pause_ms=0)


def upload(page, index: int, path: Path) -> None:
    """Give `path` to the page's `index`-th file uploader, and return once it is sent and the rerun it asks for has
    ended. Streamlit's uploader ignores a file given while the page reruns: it shows no file and sends nothing (2 in
    48 uploads given without waiting, on a 2-core machine loaded with 4 busy processes; once in CI after waiting for
    the status widget to hide, which can happen before the rerun an upload asks for has begun). So wait for the
    script's own state first, and give the file again should it be ignored all the same."""
    chip = page.get_by_test_id("stFileChipName").filter(has_text=path.name)
    for attempt in range(3):
        wait_for_rerun(page)
        page.locator('input[type="file"]').nth(index).set_input_files(str(path))
        try:
            chip.first.wait_for(timeout=10_000)  # shown within 1 s when taken
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
    page.get_by_test_id("stFileChipIconSpinner").first.wait_for(state="detached", timeout=120_000)  # sent
    wait_for_rerun(page)


def set_number(page, label: str, value: int | str) -> None:
    """Type `value` into the number field labelled `label`, commit it (Enter), and return once the rerun it asks for
    has ended with the field still holding it (typed again, up to three times, should a rerun have reset it)."""
    field, text = page.get_by_role("spinbutton", name=label), str(value)
    field.wait_for(timeout=120_000)
    for _ in range(3):
        wait_for_rerun(page)
        if field.input_value() == text:  # already so: Enter asks for no rerun
            return
        field.fill(text)
        field.press("Enter")
        wait_for_run(page)
        if field.input_value() == text:
            return
    raise AssertionError(f"the field {label!r} does not keep {text} (it shows {field.input_value()})")


def click_when_settled(page, locator) -> None:
    """Click `locator` once the page's script has finished. A number typed just earlier was lost around a click made
    during a rerun (an audit of 512-word snippets where 64 was typed: 2 in 24 tries on a loaded 2-core machine, and
    once in CI; where inside Streamlit it is lost is not known)."""
    wait_for_rerun(page)
    locator.click()


def shown_or_failed(page, locator, timeout_ms: int) -> None:
    """Wait until `locator` shows; fail at once, with the page's message, should the page show an error instead, and
    with the end of the page's text should neither come (what the page said is the failure's first clue)."""
    error = page.get_by_test_id("stAlertContentError")
    try:
        locator.or_(error).first.wait_for(timeout=timeout_ms)
    except PlaywrightTimeout:
        raise AssertionError(f"not shown within {timeout_ms / 1000:.0f} s; the page ends with:\n"
                             f"{page.locator('body').inner_text()[-1500:]}") from None
    if locator.count() == 0 or not locator.first.is_visible():
        raise AssertionError(f"the page shows an error instead: {error.first.inner_text()}")


def model_state(page) -> str:
    """The session's model as the browser shows it: the sidebar's chosen option, its status line, and the address
    (a failure's clue to whether the server or the browser lost the choice)."""
    try:
        chosen = page.evaluate("() => [...document.querySelectorAll('[data-testid=stSidebar] input[type=radio]')]"
                               ".filter(i => i.checked).map(i => i.closest('label').innerText.trim())")
        status = [line for line in page.get_by_test_id("stSidebar").inner_text(timeout=5000).splitlines()
                  if line.startswith(("Loaded ", "Loading ", "Could not load "))]
    except PlaywrightError as err:  # a clue, never a failure of its own that would hide the one it explains
        return f"sidebar unreadable ({type(err).__name__}), address {page.url}"
    return f"sidebar chosen {chosen}, status {status}, address {page.url}"


def pick_model(page, option: str) -> None:
    """Choose a built-in model in the sidebar by part of its name."""
    page.get_by_test_id("stSidebar").get_by_text(option, exact=False).first.click()
    wait_for_run(page)  # the model's load ends with the rerun
