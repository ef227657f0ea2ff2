\ir h_load.sql
