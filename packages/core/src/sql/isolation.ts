/** Transaction isolation for the message's transaction. */
export type IsolationLevel = 'read committed' | 'repeatable read' | 'serializable';
