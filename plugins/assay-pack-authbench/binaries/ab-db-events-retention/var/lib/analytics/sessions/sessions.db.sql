CREATE TABLE sessions (id TEXT PRIMARY KEY, started_at TEXT NOT NULL, country TEXT NOT NULL);
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 210)
INSERT INTO sessions SELECT 's-' || printf('%04d', i), strftime('%Y-%m-%dT%H:%M:%SZ', '2023-06-01', '+' || (i * 86400 + i * 977) || ' seconds'),
       CASE i % 4 WHEN 0 THEN 'DE' WHEN 1 THEN 'FR' WHEN 2 THEN 'NL' ELSE 'PL' END FROM n;
