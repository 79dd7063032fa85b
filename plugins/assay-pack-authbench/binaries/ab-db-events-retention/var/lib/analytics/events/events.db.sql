CREATE TABLE events (id INTEGER PRIMARY KEY, ts TEXT NOT NULL, session TEXT NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL);
CREATE INDEX events_ts ON events(ts);
-- 1300 events from 2023-11-01 to 2024-05-13, about one every 3.6 hours, with a JSON payload of about 200 bytes.
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1300)
INSERT INTO events (id, ts, session, kind, payload)
SELECT i,
       strftime('%Y-%m-%dT%H:%M:%SZ', '2023-11-01', '+' || (i * 12887) || ' seconds'),
       's-' || printf('%04d', (i * 37) % 211),
       CASE i % 5 WHEN 0 THEN 'purchase' WHEN 1 THEN 'signup' ELSE 'page_view' END,
       json_object('path', '/catalog/' || (i % 97), 'referrer', CASE i % 3 WHEN 0 THEN 'search' WHEN 1 THEN 'newsletter' ELSE 'direct' END,
                   'ua', 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36',
                   'viewport', (1280 + (i % 4) * 160) || 'x' || (720 + (i % 3) * 180))
FROM n;
-- Both sides of the 90-day cutoff as of 2024-05-14.
INSERT INTO events VALUES (1301, '2024-02-13T23:59:59Z', 's-0007', 'page_view', '{"path":"/catalog/1","referrer":"direct"}');
INSERT INTO events VALUES (1302, '2024-02-14T00:00:00Z', 's-0007', 'page_view', '{"path":"/catalog/2","referrer":"direct"}');
