// Switchboard board: the one script the board loads (issue #12). Every page works without it;
// it only (1) shows times in the viewer's own zone and a lease's countdown, (2) swaps in live
// queue headers and board rows from GET /events (native EventSource) and announces a queue
// turning exhausted, paused or unavailable, (3) returns focus to the edit control after the policy editor, and
// (4) shows copy buttons beside a value shown once (the vend wizard's URL and token), which
// stay selectable text without it, and (5) sends the browser's time zone once, while none is set.
// No inline code anywhere: the CSP is default-src 'self'.
(function () {
  'use strict';

  var ALARM = { exhausted: true, paused: true, unavailable: true };

  function localise(root) {
    var times = root.querySelectorAll('time.local');
    for (var i = 0; i < times.length; i++) {
      var when = new Date(times[i].getAttribute('datetime'));
      if (isNaN(when.getTime())) continue;
      times[i].textContent = when.toLocaleString(undefined, {
        weekday: 'short', day: 'numeric', month: 'short',
        hour: '2-digit', minute: '2-digit', timeZoneName: 'short'
      });
    }
  }

  function announce(text) {
    var region = document.getElementById('announcer');
    if (region) region.textContent = text;
  }

  function statusOf(element) {
    var body = element.querySelector('[data-status]');
    return body ? body.getAttribute('data-status') : '';
  }

  function swap(event) {
    var update;
    try { update = JSON.parse(event.data); } catch (ignored) { return; }
    var header = document.getElementById('qh-' + update.key);
    if (!header || header.getAttribute('data-version') === update.version) return;
    var before = statusOf(header);
    var row = header.getAttribute('data-form') === 'row';
    header.innerHTML = row ? update.row_html : update.html;
    header.setAttribute('data-version', update.version);
    localise(header);
    var after = statusOf(header);
    var frame = row ? header : header.closest('.card');
    if (frame) frame.classList.toggle('alarm', ALARM[after] === true);
    if (after !== before && ALARM[after] === true) {
      announce(header.getAttribute('data-queue') + ' is now ' + after);
    }
  }

  function live() {
    if (!window.EventSource || !document.querySelector('.live-header')) return;
    var source = new EventSource('/events');
    source.addEventListener('header', swap);
    source.addEventListener('signed-out', function () { source.close(); });
  }

  function returnFocus() {
    if (location.hash !== '#edit-budget') return;
    var control = document.getElementById('edit-budget');
    if (control) control.focus();
  }

  // A lease's countdown ("in 4 min 12 s"), refreshed every second; the expiry time beside it
  // is what a page without scripts shows.
  function countdown() {
    var spans = document.querySelectorAll('.countdown[data-until]');
    if (!spans.length) return;
    function tick() {
      for (var i = 0; i < spans.length; i++) {
        var left = Math.round((new Date(spans[i].getAttribute('data-until')).getTime() - Date.now()) / 1000);
        if (isNaN(left)) continue;
        if (left <= 0) {
          spans[i].textContent = '(lapsed: the reaper returns it to pending)';
        } else {
          var minutes = Math.floor(left / 60);
          spans[i].textContent = '(in ' + (minutes > 0 ? minutes + ' min ' : '') + (left % 60) + ' s)';
        }
      }
    }
    tick();
    setInterval(tick, 1000);
  }

  function copyButtons() {
    var buttons = document.querySelectorAll('button.copy[data-copy]');
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].hidden = false;
      buttons[i].addEventListener('click', function () {
        var field = document.getElementById(this.getAttribute('data-copy'));
        if (!field) return;
        field.focus();
        field.select();
        var copied = function () { announce('Copied.'); };
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(field.value).then(copied, function () {
            if (document.execCommand('copy')) copied();
          });
        } else if (document.execCommand('copy')) {
          copied();
        }
      });
    }
  }

  // (5) The first time the board runs with no time zone set for the human, it sends the
  // browser's, so later pages are written in it server-side, JavaScript or not (REQ-11).
  function sendZone() {
    var signout = document.querySelector('form.signout[data-zone-unknown]');
    if (!signout || !window.fetch || !window.Intl) return;
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    var csrf = signout.querySelector('input[name=csrf]');
    if (!zone || !csrf) return;
    var body = new URLSearchParams({ csrf: csrf.value, zone: zone, auto: '1' });
    fetch('/settings/time-zone', { method: 'POST', body: body, credentials: 'same-origin' }).catch(function () {});
  }

  localise(document);
  copyButtons();
  sendZone();
  returnFocus();
  countdown();
  live();
})();
