"""The live session: followers feeding a store, snapshots for the UI on a timer."""
