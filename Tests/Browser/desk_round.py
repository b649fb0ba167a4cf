"""An operator's support round at the desk, in a real browser (Debian's Chromium through
Selenium): sign in with the keyboard, read the open reports, find a user by e-mail, take a
listing down with a reason, settle a dispute, check an item's bid history shows its checkpoint
verified, read the log's health and run the money audit. A screenshot of every page goes to
the output folder. Run by DeskTests with one JSON argument; exits 1 naming the failed step."""

import json
import pathlib
import sys

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

plan = json.loads(sys.argv[1])
base = plan["base"]
out = pathlib.Path(plan["out"])
out.mkdir(parents=True, exist_ok=True)

options = webdriver.ChromeOptions()
options.binary_location = plan.get("chromium", "/usr/bin/chromium")
for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,1000"):
    options.add_argument(argument)
driver = webdriver.Chrome(service=Service(plan.get("chromedriver", "/usr/bin/chromedriver")), options=options)
driver.set_page_load_timeout(30)
step = "start"


def shot(name):
    driver.save_screenshot(str(out / f"{name}.png"))


def check(condition, what):
    if not condition:
        raise AssertionError(f"{what} (at {driver.current_url})")


def settled(read):
    """`read` of the page, tried again while Chromium is still swapping documents."""
    return WebDriverWait(driver, 15, ignored_exceptions=(StaleElementReferenceException, WebDriverException)).until(
        lambda _: read())


def text(selector):
    return settled(lambda: driver.find_element(By.CSS_SELECTOR, selector).text)


def no_script_ran():
    """Nothing a user wrote ran: no alert, no marker set, no script or img element at all."""
    try:
        driver.switch_to.alert
        raise AssertionError("an alert opened: a user's text ran as script")
    except NoAlertPresentException:
        pass
    check(driver.execute_script("return window.__xss === undefined"), "a user's script set window.__xss")
    check(not driver.find_elements(By.TAG_NAME, "script"), "a script element is on the page")
    check(not driver.find_elements(By.TAG_NAME, "img"), "an img element is on the page")


def navigating(action):
    """Does `action`, then waits until the page it leads to has replaced this one."""
    page = driver.find_element(By.TAG_NAME, "html")
    action()
    WebDriverWait(driver, 15).until(expected_conditions.staleness_of(page))
    settled(lambda: driver.execute_script("return document.readyState") == "complete")


def submit(form_selector, fields):
    form = driver.find_element(By.CSS_SELECTOR, form_selector)
    for name, value in fields.items():
        field = form.find_element(By.NAME, name)
        field.clear()
        field.send_keys(value)
    navigating(form.find_element(By.CSS_SELECTOR, "button[type=submit]").click)


def click(by, value):
    navigating(lambda: settled(lambda: driver.find_element(by, value)).click())


try:
    step = "sign in with the keyboard alone"
    driver.get(base + "/desk")
    check(driver.current_url.endswith("/desk/login"), "the desk sends a stranger to sign in")
    shot("01-login")
    active = driver.switch_to.active_element
    check(active.get_attribute("id") == "handle", "the handle field has the focus")
    active.send_keys(plan["handle"], Keys.TAB)
    navigating(lambda: driver.switch_to.active_element.send_keys(plan["password"], Keys.ENTER))
    check(driver.current_url.endswith("/desk/reports"), "signed in, the open reports")
    cookies = {cookie["name"]: cookie for cookie in driver.get_cookies()}
    check(cookies["lender_desk"]["httpOnly"], "the session cookie is HttpOnly")
    check(cookies["lender_desk"].get("sameSite") == "Strict", "the session cookie is SameSite=Strict")

    step = "open reports, with hostile text shown as text"
    shot("02-reports")
    check(plan["reportText"] in driver.find_element(By.TAG_NAME, "main").text, "the report's text is shown as written")
    no_script_ran()

    step = "find a user by e-mail"
    submit("form[role=search]", {"q": plan["email"]})
    check("/desk/users/" in driver.current_url, "one match by e-mail opens the user")
    check(plan["email"] in text("#user-email"), "their e-mail is shown")
    shot("03-user-by-email")

    step = "take a listing down with a reason"
    submit("form[role=search]", {"q": plan["hostileHandle"]})
    check(plan["hostileName"] in text("#user-name"), "a hostile display name is shown as text")
    no_script_ran()
    submit(f"#posting-{plan['takeDown']} form", {"reason": "Counterfeit goods"})
    check(text("#flash") == "Taken down.", "the takedown is confirmed")
    check(text(f"#posting-{plan['takeDown']} .status") == "taken_down", "the listing shows taken down")
    no_script_ran()
    shot("04-taken-down")

    step = "settle a dispute"
    click(By.LINK_TEXT, "Disputes")
    shot("05-disputes")
    click(By.CSS_SELECTOR, f"a[href='/desk/bookings/{plan['booking']}']")
    check("open" in text("#dispute-state"), "the dispute is open")
    submit(
        "#resolve-form",
        {"renterCents": str(plan["renterCents"]), "ownerCents": str(plan["ownerCents"]), "reason": "The owner never came"})
    check(text("#flash") == "Resolved.", "the resolution is confirmed")
    check("resolved" in text("#dispute-state"), "the dispute shows resolved")
    check(text("#booking-status") == "completed", "the booking ended with it")
    shot("06-dispute-resolved")

    step = "the bid history with the checkpoint verified"
    driver.get(base + f"/desk/items/{plan['historyItem']}")
    check(text("#checkpoint").startswith("Checkpoint verified"), "the last checkpoint verifies: " + text("#checkpoint"))
    check("good" in driver.find_element(By.ID, "checkpoint").get_attribute("class"), "shown as good")
    check(text("#chain").startswith("The item's hash chain verifies"), "the item's chain verifies")
    check(len(driver.find_elements(By.CSS_SELECTOR, "table code.hash")) >= 2, "each bid event shows its hashes")
    shot("07-bid-history")

    step = "the log's health and the money audit"
    click(By.LINK_TEXT, "Health")
    check(int(text("#head")) > 0, "the log's head")
    click(By.ID, "run-audit")
    check(text("#flash") == "The money audit ran.", "the audit ran")
    check("every account adds up" in text("#audit-result"), "money adds up: " + text("#audit-result"))
    shot("08-health")

    step = "every page at 360 px"
    driver.set_window_size(360, 800)
    for name, path in plan["narrowPages"].items():
        driver.get(base + path)
        width = driver.execute_script("return document.documentElement.scrollWidth")
        check(width <= 360, f"{path} is {width} px wide at 360")
        shot(f"09-narrow-{name}")
    print(json.dumps({"passed": True, "screenshots": sorted(p.name for p in out.glob("*.png"))}))
except Exception as error:  # noqa: BLE001 - any failure is the test's, with its step named
    try:
        shot("failed")
    except Exception:  # noqa: BLE001
        pass
    print(f"desk round failed at step '{step}': {error}", file=sys.stderr)
    sys.exit(1)
finally:
    driver.quit()
