-- earth_point, as 0003 wrote it, was STRICT around a call of the non-strict earth_radius_km(),
-- and PostgreSQL inlines a STRICT SQL function only when its whole body is strict. So every
-- call with a column or parameter ran the SQL function machinery, which parses and plans the
-- body on each execution: about 90 µs per row written to items_view or loans_view, on the
-- connection that holds the log head (measured with pgbench, prepared INSERTs). Without
-- STRICT it is inlined into plain C calls. A NULL argument still gives NULL: every function
-- in the body but earth_radius_km() is strict.
CREATE OR REPLACE FUNCTION earth_point(lat float8, lng float8) RETURNS cube
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT cube(cube(cube(earth_radius_km() * cos(radians(lat)) * cos(radians(lng))),
                     earth_radius_km() * cos(radians(lat)) * sin(radians(lng))),
                earth_radius_km() * sin(radians(lat)))
$$;
