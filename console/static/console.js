// The console's only script. The pages work without it (forms and links);
// it refreshes the overview, follows a running job, and helps with
// selections and typed confirmations. It never builds HTML from data:
// every value is set with textContent, so text from a queue is shown as
// text. The page's Content-Security-Policy allows this file and no inline
// script.
(function () {
	'use strict';

	function all(sel, root) {
		return Array.prototype.slice.call((root || document).querySelectorAll(sel));
	}

	function setText(el, s) {
		if (el) {
			el.textContent = s;
		}
	}

	function getJSON(url) {
		return fetch(url, { credentials: 'same-origin', headers: { Accept: 'application/json' } }).then(function (r) {
			if (!r.ok) {
				throw new Error('HTTP ' + r.status);
			}
			return r.json();
		});
	}

	// The overview refreshes its counts; a queue that came or went reloads
	// the page.
	function overview(table) {
		var every = parseInt(table.dataset.refresh, 10) || 5000;
		var api = table.dataset.api;
		function tick() {
			getJSON(api).then(function (data) {
				var byName = {};
				(data.queues || []).forEach(function (q) { byName[q.name] = q; });
				var rows = all('tbody tr[data-queue]', table);
				if (rows.length !== (data.queues || []).length) {
					location.reload();
					return;
				}
				rows.forEach(function (tr) {
					var q = byName[tr.dataset.queue];
					if (!q) {
						location.reload();
						return;
					}
					all('[data-field]', tr).forEach(function (td) {
						var f = td.dataset.field;
						var v = f === 'oldest' ? q.oldest : q[f];
						if (f === 'dlq_depth' && !q.dlq) {
							v = '';
						} else if (typeof v === 'number' && v < 0) {
							v = '?';
						}
						setText(td, String(v));
					});
				});
				setText(document.getElementById('refreshed'), 'as of ' + data.at);
			}).catch(function (e) {
				setText(document.getElementById('refreshed'), 'refresh failed (' + e.message + ')');
			}).then(function () {
				setTimeout(tick, every);
			});
		}
		setTimeout(tick, every);
	}

	// A DLQ page: tick every row, and say what the actions will take.
	function selection(form) {
		var status = document.getElementById('selection');
		var total = status ? status.dataset.total : '0';
		var picks = all('input.pick');
		function update() {
			var n = picks.filter(function (p) { return p.checked; }).length;
			setText(status, n === 0 ? total + ' matching; none ticked: actions take every matching message' : n + ' ticked: actions take these');
		}
		picks.forEach(function (p) { p.addEventListener('change', update); });
		var allBox = document.getElementById('select-all');
		if (allBox) {
			allBox.addEventListener('change', function () {
				picks.forEach(function (p) { p.checked = allBox.checked; });
				update();
			});
		}
		update();
	}

	// The delete confirmation: the button is enabled once the name typed
	// matches (the server checks it again).
	function typedConfirm(input) {
		var button = document.getElementById('delete-confirm');
		function update() {
			button.disabled = input.value !== input.dataset.want;
		}
		input.addEventListener('input', update);
		update();
	}

	// A job page follows the job until it ends.
	function job(section) {
		var api = section.dataset.api;
		function list(el, kvs) {
			setText(el, (kvs || []).map(function (kv) { return kv.name + '=' + kv.count; }).join(' '));
		}
		function show(j) {
			setText(document.getElementById('job-state'), j.state);
			setText(document.getElementById('job-elapsed'), j.elapsed);
			['received', 'moved', 'skipped', 'failed', 'refused'].forEach(function (k) {
				setText(document.getElementById('job-' + k), String(j[k]));
			});
			var bar = document.getElementById('job-progress');
			if (bar) {
				bar.max = j.planned || j.total || Math.max(j.moved, 1);
				bar.value = j.moved;
			}
			list(document.getElementById('job-by-class'), j.by_class);
			list(document.getElementById('job-by-destination'), j.by_destination);
			setText(document.getElementById('job-error'), j.error || '');
			var notes = document.getElementById('job-notes');
			if (notes) {
				while (notes.firstChild) {
					notes.removeChild(notes.firstChild);
				}
				(j.notes || []).forEach(function (n) {
					var li = document.createElement('li');
					li.textContent = n;
					notes.appendChild(li);
				});
			}
			section.dataset.state = j.state;
		}
		function tick() {
			getJSON(api).then(function (j) {
				show(j);
				if (j.state === 'running') {
					setTimeout(tick, 500);
				}
			}).catch(function () {
				setTimeout(tick, 2000);
			});
		}
		if (section.dataset.state === 'running') {
			setTimeout(tick, 300);
		}
	}

	document.addEventListener('DOMContentLoaded', function () {
		var q = document.getElementById('queues');
		if (q) {
			overview(q);
		}
		var act = document.getElementById('act');
		if (act) {
			selection(act);
		}
		var confirmName = document.getElementById('confirm-name');
		if (confirmName) {
			typedConfirm(confirmName);
		}
		var j = document.getElementById('job');
		if (j) {
			job(j);
		}
	});
}());
